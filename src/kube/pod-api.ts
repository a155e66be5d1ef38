// The few API calls the publisher makes, each with the content type it needs set explicitly
// (a merge patch for labels, a strategic merge patch for the condition), a timeout so a hung API server costs one attempt and
// never blocks anything, and an abort on stop. Failures come back classified, never raw.

import type { Clock } from "../shared/clock.ts";
import { hideCredentials } from "../shared/hide-credentials.ts";
import type { CoreEvent, Pod, PodList } from "./client/api-types.ts";
import { KubeApiError, type KubeClient, type KubeRequest } from "./client/connection.ts";
import type { ConditionPatch, MetadataPatch } from "./desired-state.ts";
import type { JsonPatchOperation } from "./guarded-patch.ts";

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
  /**
   * "forbidden": the authorizer refused (RBAC); "denied": admission refused what RBAC allows (a
   * ValidatingAdmissionPolicy, a webhook, PodSecurity), its reason in serverMessage; "refused": a
   * 403 with no Status saying why (a proxy in front of the API server), either of the two or neither.
   */
  readonly kind:
    | "conflict"
    | "forbidden"
    | "denied"
    | "refused"
    | "not-found"
    | "another-pod"
    | "server"
    | "timeout"
    | "network"
    | "rejected";
  readonly permission: Permission;
  /** The message of the Status the API server answered with, credentials in it hidden. */
  readonly serverMessage: string | undefined;

  constructor(permission: Permission, cause: unknown) {
    const status = cause instanceof KubeApiError ? cause.status : undefined;
    const kind = classify(status, cause);
    super(`${permissionName(permission)}: ${describe(status, kind, cause)}`);
    this.name = "KubeRequestError";
    this.status = status;
    this.kind = kind;
    this.permission = permission;
    const message = cause instanceof KubeApiError ? cause.body?.message : undefined;
    this.serverMessage = message === undefined ? undefined : hideCredentials(message);
  }
}

/**
 * The authorizer's refusal names the user and what it may not do: `User "…" cannot patch
 * resource "pods" in API group "" in the namespace "shop"` (or `cannot get path "…"`), as the
 * API server's responsewriters.forbiddenMessage words it. Any other 403 with a Status came from
 * admission (PodSecurity, a namespace being deleted).
 */
const AUTHORIZER_REFUSAL = /\bUser "[^"]*" cannot \S+ (?:resource|path) "/;

/**
 * Admission's refusal with a code of its choosing, worded by the API server: a
 * ValidatingAdmissionPolicy's follows its validation's reason (403 for Forbidden, 422 when it
 * names none), a webhook's is the webhook's (400 when it names none). Tested before the
 * authorizer's words, which a webhook's own text may quote.
 */
const ADMISSION_REFUSAL =
  /\bValidatingAdmissionPolicy '[^']*' (?:with binding '[^']*' )?denied request|\badmission webhook "[^"]*" denied the request/;

function classify(status: number | undefined, cause: unknown): KubeRequestError["kind"] {
  if (refusedUid(status, cause)) return "another-pod";
  const message = cause instanceof KubeApiError ? (cause.body?.message ?? "") : "";
  if (status !== undefined && ADMISSION_REFUSAL.test(message)) return "denied";
  // No Status, no reason: a proxy's 403 (an HTML page) says neither RBAC nor admission.
  if (status === 403 && message === "") return "refused";
  if (status === 403) return AUTHORIZER_REFUSAL.test(message) ? "forbidden" : "denied";
  if (status === 409) return "conflict";
  if (status === 404) return "not-found";
  if (status !== undefined && (status >= 500 || status === 429)) return "server";
  if (status !== undefined) return "rejected";
  if (cause instanceof Error && (cause.name === "TimeoutError" || cause.name === "AbortError"))
    return "timeout";
  return "network";
}

/**
 * A patch pinned to a uid (see pinned) that reached a pod of the same name with another uid: the
 * API server refuses the change of an immutable field, 422 naming metadata.uid.
 */
function refusedUid(status: number | undefined, cause: unknown): boolean {
  if (status !== 422 || !(cause instanceof KubeApiError)) return false;
  return (cause.body?.details?.causes ?? []).some((c) => c.field === "metadata.uid");
}

function describe(status: number | undefined, kind: KubeRequestError["kind"], cause: unknown): string {
  if (status === undefined) {
    if (kind === "timeout") return "no answer in time (request timed out or was aborted)";
    const reason = cause instanceof Error ? (cause.cause instanceof Error ? cause.cause : cause).message : "";
    return `network error ${reason}`.trim();
  }
  // "HTTP 403 <the Status body's message>", as the server words it, credentials hidden (KubeApiError).
  return cause instanceof KubeApiError ? cause.message : `HTTP ${status}`;
}

/**
 * One pod, not just a name: a pod deleted and created again under its name (a StatefulSet's
 * next incarnation) has another uid. A patch to a PodRef with a uid reaches only that pod.
 */
export interface PodRef {
  name: string;
  /** Undefined only where no uid is known: the patch then reaches whichever pod has the name. */
  uid: string | undefined;
}

/**
 * The patch with metadata.uid set: a PATCH cannot change a uid, so the API server refuses it with
 * 422 (metadata.uid: field is immutable) when the pod of that name is another one, and applies it
 * as it is otherwise. A strategic merge patch to pods/status is refused the same way.
 */
function pinned<T extends object>(target: PodRef, body: T): T {
  if (target.uid === undefined) return body;
  const metadata = (body as { metadata?: object }).metadata;
  return { ...body, metadata: { ...metadata, uid: target.uid } };
}

/**
 * A JSON patch that sets metadata.uid first, as pinned does for a merge patch: the same uid is no
 * change, another pod's cannot be changed (the same 422 naming metadata.uid, not a failed test).
 */
function pinnedOperations(target: PodRef, ops: JsonPatchOperation[]): JsonPatchOperation[] {
  if (target.uid === undefined) return ops;
  return [{ op: "add", path: "/metadata/uid", value: target.uid }, ...ops];
}

export interface PodApiOptions {
  client: KubeClient;
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

const MERGE_PATCH = "application/merge-patch+json";
// RFC 6902: its `test` operations make the server refuse the whole patch (422) when they fail.
const JSON_PATCH = "application/json-patch+json";
// Strategic merge merges status.conditions by type; a JSON merge patch would replace the array.
const STRATEGIC_MERGE_PATCH = "application/strategic-merge-patch+json";

/** Sends one request, abandoned after requestTimeoutMs on the injected clock or at stop; errors classified. */
function requestSender(opts: PodApiOptions) {
  return async function send<T>(permission: Permission, request: Omit<KubeRequest, "signal">): Promise<T> {
    const deadline = new AbortController();
    const timer = opts.clock.setTimer(opts.requestTimeoutMs, () =>
      deadline.abort(new DOMException(`no answer within ${opts.requestTimeoutMs} ms`, "TimeoutError")),
    );
    try {
      return await opts.client.json<T>({
        ...request,
        signal: AbortSignal.any([deadline.signal, opts.stopSignal]),
      });
    } catch (error) {
      throw new KubeRequestError(permission, error);
    } finally {
      timer.cancel();
    }
  };
}

export function createPodApi(opts: PodApiOptions) {
  const pods = `/api/v1/namespaces/${encodeURIComponent(opts.namespace)}/pods`;
  const pod = (name: string) => `${pods}/${encodeURIComponent(name)}`;
  const send = requestSender(opts);

  return {
    readPod: (): Promise<Pod> => send(PERMISSIONS.getPod, { method: "GET", path: pod(opts.podName) }),

    /** This pod as a list: its resourceVersion is where a watch of it starts. */
    listOwnPod: (): Promise<PodList> =>
      send(PERMISSIONS.listPods, {
        method: "GET",
        path: pods,
        query: { fieldSelector: `metadata.name=${opts.podName}` },
      }),

    /** The pods a label selector picks, with the list's resourceVersion (where a watch of them starts). */
    listSelected: (labelSelector: string): Promise<PodList> =>
      send(PERMISSIONS.listPods, { method: "GET", path: pods, query: { labelSelector } }),

    patchMetadata: (target: PodRef, body: MetadataPatch): Promise<Pod> =>
      send(PERMISSIONS.patchPod, {
        method: "PATCH",
        path: pod(target.name),
        body: pinned(target, body),
        contentType: MERGE_PATCH,
      }),

    /** A guarded label patch (guarded-patch.ts): a 422 when a guarded key changed since it was seen. */
    patchMetadataGuarded: (target: PodRef, body: JsonPatchOperation[]): Promise<Pod> =>
      send(PERMISSIONS.patchPod, {
        method: "PATCH",
        path: pod(target.name),
        body: pinnedOperations(target, body),
        contentType: JSON_PATCH,
      }),

    patchStatus: (target: PodRef, body: ConditionPatch): Promise<Pod> =>
      send(PERMISSIONS.patchPodStatus, {
        method: "PATCH",
        path: `${pod(target.name)}/status`,
        body: pinned(target, body),
        contentType: STRATEGIC_MERGE_PATCH,
      }),

    createEvent: (body: CoreEvent): Promise<CoreEvent> =>
      send(PERMISSIONS.createEvent, {
        method: "POST",
        path: `/api/v1/namespaces/${encodeURIComponent(opts.namespace)}/events`,
        body,
      }),

    /** SelfSubjectAccessReview: may this process do `permission` in its namespace? */
    allowed: async (permission: Permission): Promise<boolean> => {
      const review = await send<{ status?: { allowed?: boolean } }>(
        { verb: "create", resource: "selfsubjectaccessreviews" },
        {
          method: "POST",
          path: "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews",
          body: accessReview(opts.namespace, permission),
        },
      );
      return review.status?.allowed === true;
    },
  };
}

function accessReview(namespace: string, permission: Permission) {
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
