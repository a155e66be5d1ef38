// The pod watch when the version it would resume from is gone (410): it lists the pod again and
// goes on from there. Only the in-process server can be made to forget history on demand (a real
// one forgets through etcd compaction); the resumption itself runs on both servers in
// publisher-quiet.test.ts.
import pino from "pino";
import { afterEach, describe, expect, it } from "vitest";
import type { Pod } from "../../src/kube/client/api-types.ts";
import { createKubeClient, type KubeClient } from "../../src/kube/client/connection.ts";
import { kubeconfigTextConnection } from "../../src/kube/client/kubeconfig.ts";
import { createPodApi } from "../../src/kube/pod-api.ts";
import { type PodWatch, watchOwnPod } from "../../src/kube/pod-watch.ts";
import { monotonicClock } from "../../src/shared/clock.ts";
import { type KubeApiServer, startKubeApiServer } from "../support/kube/apiserver/index.ts";
import { until } from "./publisher-harness.ts";

const NS = "shop";
const POD = "orders-0";

let server: KubeApiServer | undefined;
let client: KubeClient | undefined;
let watch: PodWatch | undefined;
afterEach(async () => {
  await watch?.stop();
  client?.close();
  await server?.close();
});

describe("the pod watch after 410 Gone", () => {
  it("lists the pod again and sees what changed while it could not resume", async () => {
    // Two changes of history: more than two writes while no watch is open cannot be replayed.
    server = await startKubeApiServer({ watchHistory: 2 });
    server.seedPod({ metadata: { name: POD, namespace: NS, labels: { role: "leader" } } });
    client = createKubeClient(
      await kubeconfigTextConnection(server.kubeConfig({ namespace: NS }).exportConfig()),
    );
    const stopping = new AbortController();
    const api = createPodApi({
      client,
      namespace: NS,
      podName: POD,
      requestTimeoutMs: 5_000,
      clock: monotonicClock,
      stopSignal: stopping.signal,
    });
    const seen: Pod[] = [];
    watch = watchOwnPod({
      client,
      list: () => api.listOwnPod(),
      namespace: NS,
      podName: POD,
      logger: pino({ level: "silent" }),
      backoff: { initialMs: 200, maxMs: 200 },
      openTimeoutMs: 5_000,
      random: () => 0,
      clock: monotonicClock,
      onPod: (pod) => seen.push(pod),
      onDeleted: () => {},
    });
    await server.waitForWatches(1);
    expect(server.faults.dropWatches()).toBe(1);
    // Within the 100 ms before the watch comes back: the label goes, then two other writes.
    server.mutatePod(NS, POD, (pod) => {
      delete pod.metadata?.labels?.role;
    });
    for (const name of ["other-1", "other-2"]) server.seedPod({ metadata: { name, namespace: NS } });
    await until("the pod without its label", () => seen.at(-1)?.metadata?.labels?.role === undefined);
    await until("the next watch", () => server?.requests.at(-1)?.verb === "watch");
    await server.waitForWatches(1);
    // From the list's version; resumed from the last one seen (answered by a 410 ERROR event);
    // listed again; watched from the new list's version.
    const kinds = server.requests.map((r) => `${r.verb}${r.query.resourceVersion ? " from a version" : ""}`);
    expect(kinds).toEqual([
      "list",
      "watch from a version",
      "watch from a version",
      "list",
      "watch from a version",
    ]);
  });
});
