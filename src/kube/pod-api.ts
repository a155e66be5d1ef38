// The few API calls the publisher makes, each with the content type it needs set explicitly
// (client-node defaults to JSON Patch), a timeout so a hung API server costs one attempt and
// never blocks anything, and an abort on stop. Failures come back classified, never raw.
import {
  ApiException,
  AuthorizationV1Api,
  type ConfigurationOptions,
  CoreV1Api,
  type CoreV1Event,
  type KubeConfig,
  Observable,
  type ObservableMiddleware,
  PatchStrategy,
  setHeaderOptions,
  type V1Pod,
  type V1SelfSubjectAccessReview,
} from "@kubernetes/client-node";
import type { Clock } from "../election/clock.ts";
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
  /** Times each request out: the publisher's clock, so tests drive timeouts instead of waiting. */
  clock: Clock;
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

type RequestOptions = ConfigurationOptions<ObservableMiddleware>;

/** Options that abort the request on `signal`, with the content type set when a patch needs one. */
function requestOptions(signal: AbortSignal, contentType?: PatchStrategy): RequestOptions {
  const abortable: ObservableMiddleware = {
    pre: (request) => {
      request.setSignal(signal);
      return new Observable(Promise.resolve(request));
    },
    post: (response) => new Observable(Promise.resolve(response)),
  };
  const options = { middleware: [abortable], middlewareMergeStrategy: "append" as const };
  return contentType === undefined ? options : setHeaderOptions("Content-Type", contentType, options);
}

/** Sends one request, abandoned after requestTimeoutMs on the injected clock or at stop; errors classified. */
function requestSender(opts: PodApiOptions) {
  return async function send<T>(
    permission: Permission,
    request: (options: RequestOptions) => Promise<T>,
    contentType?: PatchStrategy,
  ): Promise<T> {
    const deadline = new AbortController();
    const timer = opts.clock.setTimer(opts.requestTimeoutMs, () =>
      deadline.abort(new DOMException(`no answer within ${opts.requestTimeoutMs} ms`, "TimeoutError")),
    );
    try {
      return await request(requestOptions(AbortSignal.any([deadline.signal, opts.stopSignal]), contentType));
    } catch (error) {
      throw new KubeRequestError(permission, error);
    } finally {
      timer.cancel();
    }
  };
}

export function createPodApi(opts: PodApiOptions) {
  const core = opts.kubeConfig.makeApiClient(CoreV1Api);
  const authorization = opts.kubeConfig.makeApiClient(AuthorizationV1Api);
  const { namespace } = opts;
  const send = requestSender(opts);

  return {
    readPod: (): Promise<V1Pod> =>
      send(PERMISSIONS.getPod, (options) =>
        core.readNamespacedPod({ name: opts.podName, namespace }, options),
      ),

    listPods: async (labelSelector: string): Promise<V1Pod[]> =>
      (
        await send(PERMISSIONS.listPods, (options) =>
          core.listNamespacedPod({ namespace, labelSelector }, options),
        )
      ).items,

    patchMetadata: (name: string, body: MetadataPatch): Promise<V1Pod> =>
      send(
        PERMISSIONS.patchPod,
        (options) => core.patchNamespacedPod({ name, namespace, body }, options),
        PatchStrategy.MergePatch,
      ),

    // Strategic merge merges status.conditions by type; a JSON merge patch would replace the array.
    patchStatus: (name: string, body: ConditionPatch): Promise<V1Pod> =>
      send(
        PERMISSIONS.patchPodStatus,
        (options) => core.patchNamespacedPodStatus({ name, namespace, body }, options),
        PatchStrategy.StrategicMergePatch,
      ),

    createEvent: (body: CoreV1Event): Promise<CoreV1Event> =>
      send(PERMISSIONS.createEvent, (options) => core.createNamespacedEvent({ namespace, body }, options)),

    /** SelfSubjectAccessReview: may this process do `permission` in its namespace? */
    allowed: async (permission: Permission): Promise<boolean> => {
      const body = accessReview(namespace, permission);
      const review = await send({ verb: "create", resource: "selfsubjectaccessreviews" }, (options) =>
        authorization.createSelfSubjectAccessReview({ body }, options),
      );
      return review.status?.allowed === true;
    },
  };
}

function accessReview(namespace: string, permission: Permission): V1SelfSubjectAccessReview {
  return {
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
  };
}

export type PodApi = ReturnType<typeof createPodApi>;
