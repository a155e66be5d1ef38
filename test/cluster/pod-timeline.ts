// A release's pods over time, from a watch: every event stamped with the local clock, so a suite
// reads off afterwards who carried the leader label when, each term's fence, when a pod turned
// NotReady or Ready, and when a pod object went away.
import { type ApiEndpoint, watch } from "./api.ts";

export interface PodState {
  name: string;
  /** The pod's Ready condition. */
  ready: boolean;
  /** Its graceful deletion began (deletionTimestamp). */
  deleting: boolean;
  /** The pod object is gone from the API (the kubelet confirmed every container stopped). */
  gone: boolean;
  /** The pglease.io/role label, or null. */
  role: string | null;
  /** The pglease.io/fence annotation as a number, or null. */
  fence: number | null;
  /** The pod-template-hash label: which ReplicaSet (rollout revision) it belongs to. */
  revision: string | null;
  /** Each container's state as the kubelet reports it, a native sidecar's included. */
  containers: Record<string, ContainerState>;
}

export interface ContainerState {
  running: boolean;
  /** Its startup probe passed (or it has none). */
  started: boolean;
  ready: boolean;
  restarts: number;
}

interface ContainerStatusJson {
  name: string;
  ready: boolean;
  started?: boolean;
  restartCount: number;
  state?: { running?: unknown };
}

export interface PodEvent {
  atMs: number;
  pod: PodState;
}

interface PodJson {
  metadata: {
    name: string;
    labels?: Record<string, string>;
    annotations?: Record<string, string>;
    deletionTimestamp?: string;
  };
  status?: {
    conditions?: { type: string; status: string }[];
    containerStatuses?: ContainerStatusJson[];
    initContainerStatuses?: ContainerStatusJson[];
  };
}

export interface PodTimeline {
  events: PodEvent[];
  /** Every pod seen, as of its last event. */
  current(): PodState[];
  /** Resolves when `done` accepts the pods as they are (now or after a later event). */
  waitFor(
    done: (pods: PodState[]) => boolean,
    timeoutMs: number,
  ): Promise<{ atMs: number; pods: PodState[] }>;
  /** The first event from `fromMs` on that `match` accepts, or undefined. */
  first(match: (pod: PodState) => boolean, fromMs: number): PodEvent | undefined;
  /** Each pod that took the leader label from `fromMs` on, in order, with its fence then. */
  newLeaders(fromMs: number): { atMs: number; name: string; fence: number | null }[];
  stop(): void;
}

/** `endpoint`: another API server than the cluster's (the watch's own tests). */
export async function watchPods(
  namespace: string,
  selector: string,
  endpoint?: ApiEndpoint,
): Promise<PodTimeline> {
  const pods = new Map<string, PodState>();
  const events: PodEvent[] = [];
  const waiters = new Set<() => void>();
  const onEvent = (type: string, pod: PodJson) => {
    const state: PodState = {
      name: pod.metadata.name,
      ready: pod.status?.conditions?.some((c) => c.type === "Ready" && c.status === "True") ?? false,
      deleting: pod.metadata.deletionTimestamp !== undefined,
      gone: type === "DELETED",
      role: pod.metadata.labels?.["pglease.io/role"] ?? null,
      fence: pod.metadata.annotations?.["pglease.io/fence"]
        ? Number(pod.metadata.annotations["pglease.io/fence"])
        : null,
      revision: pod.metadata.labels?.["pod-template-hash"] ?? null,
      containers: Object.fromEntries(
        [...(pod.status?.initContainerStatuses ?? []), ...(pod.status?.containerStatuses ?? [])].map((c) => [
          c.name,
          {
            running: c.state?.running !== undefined,
            started: c.started ?? false,
            ready: c.ready,
            restarts: c.restartCount,
          },
        ]),
      ),
    };
    pods.set(state.name, state);
    events.push({ atMs: performance.now(), pod: state });
    for (const waiter of waiters) waiter();
  };
  const stream = await watch<PodJson>(
    `/api/v1/namespaces/${namespace}/pods?labelSelector=${encodeURIComponent(selector)}`,
    onEvent,
    endpoint,
  );
  await stream.started;
  const current = () => [...pods.values()];
  return {
    events,
    current,
    waitFor(done, timeoutMs) {
      return new Promise((resolve, reject) => {
        const check = () => {
          const now = current();
          if (done(now)) {
            waiters.delete(check);
            clearTimeout(timer);
            resolve({ atMs: performance.now(), pods: now });
          }
        };
        const timer = setTimeout(() => {
          waiters.delete(check);
          const ended = stream.ended();
          reject(
            new Error(
              `${ended ? `(watch ended: ${ended}) ` : ""}pods: not as expected after ${timeoutMs} ms; ` +
                `now ${JSON.stringify(current())}`,
            ),
          );
        }, timeoutMs);
        waiters.add(check);
        check();
      });
    },
    first: (match, fromMs) => events.find((e) => e.atMs >= fromMs && match(e.pod)),
    newLeaders(fromMs) {
      // A pod counts once per term it took: the label (re)appearing on it, or its fence moving.
      const seen = new Map<string, number | null>();
      for (const e of events)
        if (e.atMs < fromMs && e.pod.role === "leader") seen.set(e.pod.name, e.pod.fence);
      const out: { atMs: number; name: string; fence: number | null }[] = [];
      const labelled = new Set([...seen.keys()]);
      for (const e of events) {
        if (e.atMs < fromMs) continue;
        const leads = e.pod.role === "leader" && !e.pod.gone;
        if (!leads) {
          labelled.delete(e.pod.name);
          continue;
        }
        if (!labelled.has(e.pod.name) || seen.get(e.pod.name) !== e.pod.fence) {
          out.push({ atMs: e.atMs, name: e.pod.name, fence: e.pod.fence });
        }
        labelled.add(e.pod.name);
        seen.set(e.pod.name, e.pod.fence);
      }
      return out;
    },
    stop: () => stream.stop(),
  };
}
