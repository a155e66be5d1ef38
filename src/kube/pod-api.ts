// The few API calls the publisher makes, each with the content type it needs set explicitly
// (client-node defaults to JSON Patch), a timeout so a hung API server costs one attempt and
// never blocks anything, and an abort on stop. Failures come back classified, never raw.
import {
  ApiException,
  AuthorizationV1Api,
  CoreV1Api,
  type CoreV1Event,
  type KubeConfig,
  Observable,
  type ObservableMiddleware,
  PatchStrategy,
  setHeaderOptions,
  type V1Pod,
} from "@kubernetes/client-node";
import type { ConditionPatch, MetadataPatch } from "./desired-state.ts";

export interface Permission {
  verb: string;
  resource: string;
  subresource?: string;
}

export function permissionName(p: Permission): string {
  return `${p.verb} ${p.resource}${p.subresource ? `/${p.subresource}` : ""}`;
}

export class KubeRequestError extends Error {
  readonly status: number | undefined;
  readonly kind: "conflict" | "forbidden" | "not-found" | "server" | "timeout" | "network" | "rejected";
  readonly permission: Permission;

  constructor(permission: Permission, cause: unknown) {
    const status = cause instanceof ApiException ? cause.code : undefined;
    const kind = classify(status, cause);
    super(`${permissionName(permission)}: ${describe(status, kind, cause)}`);
    this.name = "KubeRequestError";
    this.status = status;
    this.kind = kind;
    this.permission = permission;
  }
}

function classify(status: number | undefined, cause: unknown): KubeRequestError["kind"] {
  if (status === 409) return "conflict";
  if (status === 403) return "forbidden";
  if (status === 404) return "not-found";
  if (status !== undefined && (status >= 500 || status === 429)) return "server";
  if (status !== undefined) return "rejected";
  if (cause instanceof Error && (cause.name === "TimeoutError" || cause.name === "AbortError"))
    return "timeout";
  return "network";
}

function describe(status: number | undefined, kind: KubeRequestError["kind"], cause: unknown): string {
  if (status === undefined) {
    if (kind === "timeout") return "no answer in time (request timed out or was aborted)";
    const reason = cause instanceof Error ? (cause.cause instanceof Error ? cause.cause : cause).message : "";
    return `network error ${reason}`.trim();
  }
  // The Status body's message only; the exception text also carries response headers.
  let message = "";
  if (cause instanceof ApiException && typeof cause.body === "string") {
    try {
      const parsed = JSON.parse(cause.body) as { message?: unknown };
      if (typeof parsed.message === "string") message = parsed.message;
    } catch {
      message = cause.body.slice(0, 200);
    }
  }
  return `HTTP ${status}${message ? ` ${message}` : ""}`;
}

export interface PodApiOptions {
  kubeConfig: KubeConfig;
  namespace: string;
  podName: string;
  requestTimeoutMs: number;
  /** Aborts every request in flight when the publisher stops. */
  stopSignal: AbortSignal;
}

export const PERMISSIONS = {
  getPod: { verb: "get", resource: "pods" },
  listPods: { verb: "list", resource: "pods" },
  watchPods: { verb: "watch", resource: "pods" },
  patchPod: { verb: "patch", resource: "pods" },
  patchPodStatus: { verb: "patch", resource: "pods", subresource: "status" },
  createEvent: { verb: "create", resource: "events" },
} as const satisfies Record<string, Permission>;

export function createPodApi(opts: PodApiOptions) {
  const core = opts.kubeConfig.makeApiClient(CoreV1Api);
  const authorization = opts.kubeConfig.makeApiClient(AuthorizationV1Api);
  const { namespace } = opts;

  const timeout: ObservableMiddleware = {
    pre: (request) => {
      request.setSignal(AbortSignal.any([AbortSignal.timeout(opts.requestTimeoutMs), opts.stopSignal]));
      return new Observable(Promise.resolve(request));
    },
    post: (response) => new Observable(Promise.resolve(response)),
  };
  const bounded = { middleware: [timeout], middlewareMergeStrategy: "append" as const };
  const mergePatch = setHeaderOptions("Content-Type", PatchStrategy.MergePatch, bounded);
  // Strategic merge merges status.conditions by type; a JSON merge patch would replace the array.
  const strategicMergePatch = setHeaderOptions("Content-Type", PatchStrategy.StrategicMergePatch, bounded);

  async function call<T>(permission: Permission, run: () => Promise<T>): Promise<T> {
    try {
      return await run();
    } catch (error) {
      throw new KubeRequestError(permission, error);
    }
  }

  return {
    readPod: (): Promise<V1Pod> =>
      call(PERMISSIONS.getPod, () => core.readNamespacedPod({ name: opts.podName, namespace }, bounded)),

    listPods: async (labelSelector: string): Promise<V1Pod[]> =>
      (await call(PERMISSIONS.listPods, () => core.listNamespacedPod({ namespace, labelSelector }, bounded)))
        .items,

    patchMetadata: (name: string, body: MetadataPatch): Promise<V1Pod> =>
      call(PERMISSIONS.patchPod, () => core.patchNamespacedPod({ name, namespace, body }, mergePatch)),

    patchStatus: (name: string, body: ConditionPatch): Promise<V1Pod> =>
      call(PERMISSIONS.patchPodStatus, () =>
        core.patchNamespacedPodStatus({ name, namespace, body }, strategicMergePatch),
      ),

    createEvent: (body: CoreV1Event): Promise<CoreV1Event> =>
      call(PERMISSIONS.createEvent, () => core.createNamespacedEvent({ namespace, body }, bounded)),

    /** SelfSubjectAccessReview: may this process do `permission` in its namespace? */
    allowed: async (permission: Permission): Promise<boolean> => {
      const review = await call({ verb: "create", resource: "selfsubjectaccessreviews" }, () =>
        authorization.createSelfSubjectAccessReview(
          {
            body: {
              apiVersion: "authorization.k8s.io/v1",
              kind: "SelfSubjectAccessReview",
              spec: {
                resourceAttributes: {
                  namespace,
                  verb: permission.verb,
                  group: "",
                  resource: permission.resource,
                  ...(permission.subresource ? { subresource: permission.subresource } : {}),
                },
              },
            },
          },
          bounded,
        ),
      );
      return review.status?.allowed === true;
    },
  };
}

export type PodApi = ReturnType<typeof createPodApi>;
