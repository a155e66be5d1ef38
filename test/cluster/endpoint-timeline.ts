// The ready pods behind a Service over time, from a watch on its EndpointSlices (what kube-proxy
// itself follows): every change stamped with the local clock, so the time with no ready endpoint
// and the time with two can be read off afterwards.
import { type ApiEndpoint, watch } from "./api.ts";

interface Slice {
  metadata: { name: string };
  endpoints?: { conditions?: { ready?: boolean }; targetRef?: { name: string } }[];
}

export interface Change {
  atMs: number;
  ready: string[];
}

export interface EndpointTimeline {
  changes: Change[];
  /** Milliseconds within [fromMs, toMs] during which `count(ready)` satisfied `when`. */
  durationWhere(when: (ready: string[]) => boolean, fromMs: number, toMs: number): number;
  /** Resolves at the first change (from now on) that `done` accepts, or with what holds already. */
  waitFor(done: (ready: string[]) => boolean, timeoutMs: number): Promise<Change>;
  stop(): void;
}

export async function watchEndpoints(
  namespace: string,
  service: string,
  endpoint?: ApiEndpoint,
): Promise<EndpointTimeline> {
  const slices = new Map<string, string[]>();
  const changes: Change[] = [];
  const waiters = new Set<() => void>();
  const union = () => [...new Set([...slices.values()].flat())].sort();
  const onEvent = (type: string, slice: Slice) => {
    const ready = (slice.endpoints ?? [])
      .filter((e) => e.conditions?.ready !== false)
      .map((e) => e.targetRef?.name ?? "?");
    if (type === "DELETED") slices.delete(slice.metadata.name);
    else slices.set(slice.metadata.name, ready);
    const now = union();
    const last = changes.at(-1)?.ready;
    if (!last || last.join() !== now.join()) changes.push({ atMs: performance.now(), ready: now });
    for (const waiter of waiters) waiter();
  };
  // What kube-proxy itself follows.
  const selector = encodeURIComponent(`kubernetes.io/service-name=${service}`);
  const stream = await watch<Slice>(
    `/apis/discovery.k8s.io/v1/namespaces/${namespace}/endpointslices?labelSelector=${selector}`,
    onEvent,
    endpoint,
  );
  await stream.started;
  return {
    changes,
    durationWhere(when, fromMs, toMs) {
      let total = 0;
      for (let i = 0; i < changes.length; i++) {
        const change = changes[i];
        if (!change || !when(change.ready)) continue;
        const start = Math.max(change.atMs, fromMs);
        const end = Math.min(changes[i + 1]?.atMs ?? toMs, toMs);
        if (end > start) total += end - start;
      }
      return total;
    },
    waitFor(done, timeoutMs) {
      return new Promise((resolve, reject) => {
        const check = () => {
          const last = changes.at(-1);
          if (last && done(last.ready)) {
            waiters.delete(check);
            clearTimeout(timer);
            resolve(last);
          }
        };
        const timer = setTimeout(() => {
          waiters.delete(check);
          reject(
            new Error(
              `${stream.ended() ? `(watch ended: ${stream.ended()}) ` : ""}` +
                `endpoints: not as expected after ${timeoutMs} ms; last ${JSON.stringify(changes.at(-1))}`,
            ),
          );
        }, timeoutMs);
        waiters.add(check);
        check();
      });
    },
    stop: () => stream.stop(),
  };
}
