// The ready pods behind a Service over time, from a watch on its EndpointSlices (what kube-proxy
// itself follows): every change stamped with the local clock, so the time with no ready endpoint
// and the time with two can be read off afterwards.
import { readFile } from "node:fs/promises";
import { request } from "node:https";
import { API_SERVER } from "./layout.ts";
import { pki } from "./pki.ts";

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

export async function watchEndpoints(namespace: string, service: string): Promise<EndpointTimeline> {
  const [ca, cert, key] = await Promise.all(
    [pki.caCert, pki.cert("admin"), pki.key("admin")].map((f) => readFile(f)),
  );
  const slices = new Map<string, string[]>();
  const changes: Change[] = [];
  const waiters = new Set<() => void>();
  const union = () => [...new Set([...slices.values()].flat())].sort();
  let synced: () => void = () => undefined;
  let failed: (error: Error) => void = () => undefined;
  const firstEvent = new Promise<void>((resolve, reject) => {
    synced = resolve;
    failed = reject;
  });
  let ended: string | null = null;
  const onEvent = (type: string, slice: Slice) => {
    const ready = (slice.endpoints ?? [])
      .filter((e) => e.conditions?.ready !== false)
      .map((e) => e.targetRef?.name ?? "?");
    if (type === "DELETED") slices.delete(slice.metadata.name);
    else slices.set(slice.metadata.name, ready);
    const now = union();
    const last = changes.at(-1)?.ready;
    if (!last || last.join() !== now.join()) changes.push({ atMs: performance.now(), ready: now });
    synced();
    for (const waiter of waiters) waiter();
  };
  // A plain watch over HTTPS, newline-delimited JSON events, as kube-proxy's informer reads them.
  const selector = encodeURIComponent(`kubernetes.io/service-name=${service}`);
  const req = request(
    `${API_SERVER}/apis/discovery.k8s.io/v1/namespaces/${namespace}/endpointslices?watch=1&labelSelector=${selector}`,
    { ca, cert, key },
    (res) => {
      if (res.statusCode !== 200) failed(new Error(`endpointslices watch: HTTP ${res.statusCode}`));
      let buffer = "";
      res.setEncoding("utf8");
      res.on("data", (chunk: string) => {
        buffer += chunk;
        for (let nl = buffer.indexOf("\n"); nl >= 0; nl = buffer.indexOf("\n")) {
          const line = buffer.slice(0, nl);
          buffer = buffer.slice(nl + 1);
          if (line.trim()) {
            const event = JSON.parse(line) as { type: string; object: Slice };
            onEvent(event.type, event.object);
          }
        }
      });
      res.on("end", () => {
        ended = "the API server ended the watch";
      });
    },
  );
  req.on("error", (error) => {
    ended = error.message;
    failed(error);
  });
  req.end();
  await firstEvent;
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
              `${ended ? `(watch ended: ${ended}) ` : ""}` +
                `endpoints: not as expected after ${timeoutMs} ms; last ${JSON.stringify(changes.at(-1))}`,
            ),
          );
        }, timeoutMs);
        waiters.add(check);
        check();
      });
    },
    stop: () => req.destroy(),
  };
}
