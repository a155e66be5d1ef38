// The pod watch when the version it would resume from is gone (410): it lists the pod again and
// goes on from there, on the in-process server (which forgets all but its last changes on demand)
// and on the real kube-apiserver (etcd compacting every second, no watch cache in front of it:
// the watch cache keeps a version for at least 75 s, etcd's compaction forgets it). The resumption
// itself runs on both servers in publisher-quiet.test.ts. And a watch that fails with an ERROR
// event: retried, its Status message logged with the credentials hidden.
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { ApiException, CoreV1Api, type KubeConfig } from "@kubernetes/client-node";
import { afterAll, afterEach, describe, expect, it } from "vitest";
import type { Pod, PodList } from "../../src/kube/client/api-types.ts";
import { createKubeClient, type KubeClient } from "../../src/kube/client/connection.ts";
import { kubeconfigTextConnection } from "../../src/kube/client/kubeconfig.ts";
import { createPodApi } from "../../src/kube/pod-api.ts";
import { type PodWatch, watchOwnPod } from "../../src/kube/pod-watch.ts";
import { createLogger } from "../../src/observability/logger.ts";
import { monotonicClock } from "../../src/shared/clock.ts";
import { type KubeApiServer, startKubeApiServer } from "../support/kube/apiserver/index.ts";
import { kubeServers, realKubeServer } from "../support/kube/kube-servers.ts";
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

/** The pod watch through this kubeconfig, its own pod listed through the pod API; what it sees and logs. */
async function watchOn(
  kubeConfig: KubeConfig,
): Promise<{ seen: Pod[]; logs: Array<Record<string, unknown>> }> {
  client = createKubeClient(await kubeconfigTextConnection(kubeConfig.exportConfig()));
  const api = createPodApi({
    client,
    namespace: NS,
    podName: POD,
    requestTimeoutMs: 5_000,
    clock: monotonicClock,
    stopSignal: new AbortController().signal,
  });
  const seen: Pod[] = [];
  const logs: Array<Record<string, unknown>> = [];
  watch = watchOwnPod({
    client,
    list: () => api.listOwnPod(),
    namespace: NS,
    podName: POD,
    logger: createLogger("debug", [], { write: (line) => logs.push(JSON.parse(line)) }),
    backoff: { initialMs: 200, maxMs: 200 },
    openTimeoutMs: 5_000,
    random: () => 0,
    clock: monotonicClock,
    onPod: (pod) => seen.push(pod),
    onDeleted: () => {},
  });
  return { seen, logs };
}

describe("the pod watch after 410 Gone", () => {
  it("lists the pod again and sees what changed while it could not resume", async () => {
    // Two changes of history: more than two writes while no watch is open cannot be replayed.
    server = await startKubeApiServer({ watchHistory: 2 });
    server.seedPod({ metadata: { name: POD, namespace: NS, labels: { role: "leader" } } });
    const { seen } = await watchOn(server.kubeConfig({ namespace: NS }));
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

describe("a watch that fails with an ERROR event", () => {
  it("is retried, and its Status message is logged with the credentials hidden", async () => {
    server = await startKubeApiServer();
    server.seedPod({ metadata: { name: POD, namespace: NS } });
    // A message that quotes what the server refused, as an admission webhook's or a storage
    // error's text can: an env var's value and a token.
    const secret = "hunter2-s3cret";
    server.faults.failNext({
      match: { watch: true },
      status: 500,
      watchEvent: true,
      message: `Internal error occurred: pod ${POD}: {"name":"DB_PASSWORD","value":"${secret}"} token=${secret}`,
    });
    const { logs } = await watchOn(server.kubeConfig({ namespace: NS }));
    await until("the failed watch logged", () => logs.some((l) => l.msg === "pod watch failed; retrying"));
    await server.waitForWatches(1);
    const failed = logs.find((l) => l.msg === "pod watch failed; retrying");
    expect(failed?.err).toBe(
      `watch error: Internal error occurred: pod ${POD}: {"name":"DB_PASSWORD","value":"***"} token=***`,
    );
    expect(JSON.stringify(logs)).not.toContain(secret);
    // Answered as the real server fails a watch it began: 200, then the ERROR event.
    expect(server.requests.map((r) => `${r.verb} ${r.status}`)).toEqual([
      "list 200",
      "watch 200",
      "watch 200",
    ]);
    // The next watch streams: no change can be missed, whatever failed before it.
    await until("the watch healthy again", () => watch?.healthy() === true);
  });
});

describe("a watch line that is not JSON", () => {
  it("is retried, and logged without quoting the line: a pod's env values may be in it", async () => {
    // A line mangled on its way (a proxy): V8's SyntaxError quotes ten characters either side of
    // where parsing stopped, here the start of an env var's value.
    const secret = "hunter2-s3cret";
    const watches: string[] = [];
    const raw = createServer((req, res) => {
      res.setHeader("Content-Type", "application/json");
      if (!req.url?.includes("watch=true")) {
        res.end(JSON.stringify({ kind: "PodList", metadata: { resourceVersion: "1" }, items: [] }));
        return;
      }
      watches.push(req.url);
      res.end(
        `{"type":"MODIFIED","object":{"metadata":{"name":"${POD}"},"spec":{"containers":[{"env":[{"name":"DB_PASSWORD","value":${secret}}]}]}}}\n`,
      );
    });
    await new Promise<void>((resolve) => raw.listen(0, "127.0.0.1", resolve));
    const { port } = raw.address() as AddressInfo;
    client = createKubeClient({
      server: new URL(`http://127.0.0.1:${port}`),
      tls: { rejectUnauthorized: true },
      authorization: async () => undefined,
    });
    const through = client;
    const logs: Array<Record<string, unknown>> = [];
    try {
      watch = watchOwnPod({
        client,
        list: () =>
          through.json<PodList>({
            method: "GET",
            path: `/api/v1/namespaces/${NS}/pods`,
            signal: AbortSignal.timeout(5_000),
          }),
        namespace: NS,
        podName: POD,
        logger: createLogger("debug", [], { write: (line) => logs.push(JSON.parse(line)) }),
        backoff: { initialMs: 50, maxMs: 50 },
        openTimeoutMs: 5_000,
        random: () => 0,
        clock: monotonicClock,
        onPod: () => {},
        onDeleted: () => {},
      });
      // Retried: the line is not taken for the end of the watch.
      await until("the watch retried", () => watches.length >= 2);
      const failed = logs.find((l) => l.msg === "pod watch failed; retrying");
      expect(JSON.stringify(logs)).not.toContain("hunter2");
      expect(failed?.err).toMatch(/^the watch sent a line that is not JSON/);
      await watch.stop();
    } finally {
      raw.closeAllConnections();
      raw.close();
    }
  });
});

const onReal = (await kubeServers("pod watch on a compacting etcd")).some((kind) => kind.name === "real");

describe.skipIf(!onReal)("the pod watch after 410 Gone, on the real kube-apiserver", () => {
  const real = realKubeServer({ flags: ["--watch-cache=false", "--etcd-compaction-interval=1s"] });
  afterAll(() => real.release());

  it("is answered with a 410 ERROR event once etcd compacted its version, and lists the pod again", async () => {
    const kube = await real.start({ namespace: NS });
    try {
      await kube.seedPod({ metadata: { name: POD, labels: { role: "leader" } } });
      const { seen } = await watchOn(kube.kubeConfig({ namespace: NS }));
      await kube.waitForWatches(1);
      // The next watch is held until etcd has forgotten what it would resume from.
      const held = kube.faults.hang({ match: { watch: true } });
      expect(kube.faults.dropWatches()).toBe(1);
      await held.waitForHeld(1);
      const changed = await kube.mutatePod(NS, POD, (pod) => {
        delete pod.metadata?.labels?.role;
      });
      // A later write, for the compaction (to the revision of its previous tick) to pass the change.
      await kube.seedPod({ metadata: { name: "other-1" } });
      const core = kube.kubeConfig({ namespace: NS }).makeApiClient(CoreV1Api);
      const exact = { namespace: NS, resourceVersionMatch: "Exact" };
      await until(
        "etcd compacted past the change",
        () =>
          core.listNamespacedPod({ ...exact, resourceVersion: changed.metadata?.resourceVersion }).then(
            () => false,
            (error: unknown) => error instanceof ApiException && error.code === 410,
          ),
        15_000,
      );
      held.release();
      await until("the pod without its label", () => seen.at(-1)?.metadata?.labels?.role === undefined);
      // From the list's version; resumed from the last one seen (answered by a 410 ERROR event);
      // listed again; watched from the new list's version. (The test's own exact lists left out.)
      const kinds = () =>
        kube.requests
          .filter((r) => r.query.resourceVersionMatch === undefined)
          .map((r) => `${r.verb}${r.query.resourceVersion ? " from a version" : ""} ${r.status}`);
      await until("watching again", () => kinds().length === 5 && kinds()[4]?.endsWith(" 200") === true);
      expect(kinds()).toEqual([
        "list 200",
        "watch from a version 200",
        "watch from a version 200",
        "list 200",
        "watch from a version 200",
      ]);
    } finally {
      await kube.close();
    }
  });
});
