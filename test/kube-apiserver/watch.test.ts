import { CoreV1Api, makeInformer, type V1Pod, Watch } from "@kubernetes/client-node";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { type KubeApiServer, startKubeApiServer } from "../support/kube/apiserver/index.ts";

let server: KubeApiServer;
let controllers: AbortController[];

interface Seen {
  type: string;
  name: string | undefined;
  labels: Record<string, string> | undefined;
  code?: number;
}

/** Collects watch events and lets a test await the n-th one, or the end of the stream. */
function collector() {
  const seen: Seen[] = [];
  let wake = () => {};
  let ended: { error: unknown } | undefined;
  const changed = () => wake();
  return {
    seen,
    onEvent: (type: string, object: V1Pod & { code?: number }) => {
      seen.push({ type, name: object.metadata?.name, labels: object.metadata?.labels, code: object.code });
      changed();
    },
    onDone: (error: unknown) => {
      ended = { error };
      changed();
    },
    async until(predicate: () => boolean): Promise<void> {
      while (!predicate()) await new Promise<void>((resolve) => (wake = resolve));
    },
    async count(n: number): Promise<Seen[]> {
      await this.until(() => seen.length >= n);
      return seen.slice(0, n);
    },
    async end(): Promise<{ error: unknown }> {
      await this.until(() => ended !== undefined);
      return ended as { error: unknown };
    },
  };
}

/** Resolves once the server streams: it subscribes before it sends the response headers the client awaits. */
async function watchPods(query: Record<string, string>, c: ReturnType<typeof collector>) {
  const controller = await new Watch(server.kubeConfig()).watch(
    "/api/v1/namespaces/default/pods",
    query,
    c.onEvent,
    c.onDone,
  );
  controllers.push(controller);
  return controller;
}

beforeEach(async () => {
  controllers = [];
  server = await startKubeApiServer();
  server.seedPod({ metadata: { name: "p1", labels: { app: "db" } } });
  server.seedPod({ metadata: { name: "p2", labels: { app: "web" } } });
});
afterEach(async () => {
  for (const c of controllers) c.abort();
  await server.close();
});

describe("watch", () => {
  it("starts with ADDED for existing pods, then sees a change made by someone else as MODIFIED", async () => {
    const c = collector();
    await watchPods({ fieldSelector: "metadata.name=p1" }, c);
    expect(await c.count(1)).toEqual([{ type: "ADDED", name: "p1", labels: { app: "db" } }]);
    const rv = Number(server.pod("default", "p1")?.metadata?.resourceVersion);
    const changed = server.mutatePod("default", "p1", (pod) => {
      delete pod.metadata?.labels?.app;
    });
    expect(Number(changed.metadata?.resourceVersion)).toBeGreaterThan(rv);
    expect((await c.count(2))[1]).toEqual({ type: "MODIFIED", name: "p1", labels: {} });
  });

  // A pod's DELETE with grace period 0 is, in the real registry, an update that marks the pod
  // (deletionTimestamp, deletionGracePeriodSeconds 0) and then the removal: two events.
  it("from a resourceVersion replays only later changes, and sees a deletion as marked (MODIFIED), then DELETED", async () => {
    const rv = server.resourceVersion;
    server.mutatePod("default", "p2", (pod) => {
      pod.metadata = { ...pod.metadata, labels: { app: "web", v: "2" } };
    });
    const c = collector();
    await watchPods({ resourceVersion: String(rv) }, c);
    server.deletePod("default", "p1");
    expect((await c.count(3)).map((e) => `${e.type} ${e.name}`)).toEqual([
      "MODIFIED p2",
      "MODIFIED p1",
      "DELETED p1",
    ]);
  });

  it("with a label selector, a pod that stops matching is DELETED and one that starts matching is ADDED", async () => {
    const c = collector();
    await watchPods({ labelSelector: "app=db" }, c);
    await c.count(1);
    server.mutatePod("default", "p1", (pod) => {
      pod.metadata = { ...pod.metadata, labels: { app: "other" } };
    });
    server.mutatePod("default", "p2", (pod) => {
      pod.metadata = { ...pod.metadata, labels: { app: "db" } };
    });
    expect((await c.count(3)).map((e) => `${e.type} ${e.name}`)).toEqual([
      "ADDED p1",
      "DELETED p1",
      "ADDED p2",
    ]);
  });

  it("answers a resourceVersion older than the kept history with an ERROR event carrying 410", async () => {
    await server.close();
    server = await startKubeApiServer({ watchHistory: 3 });
    server.seedPod({ metadata: { name: "p1" } });
    const old = server.resourceVersion;
    for (let i = 0; i < 4; i++) {
      server.mutatePod("default", "p1", (pod) => {
        pod.metadata = { ...pod.metadata, annotations: { i: String(i) } };
      });
    }
    const c = collector();
    await watchPods({ resourceVersion: String(old) }, c);
    expect(await c.count(1)).toEqual([{ type: "ERROR", name: undefined, labels: undefined, code: 410 }]);
    expect((await c.end()).error).toBeNull();
    const recent = collector();
    await watchPods({ resourceVersion: String(server.resourceVersion - 2) }, recent);
    expect((await recent.count(2)).map((e) => e.type)).toEqual(["MODIFIED", "MODIFIED"]);
  });

  it("ends the stream cleanly after timeoutSeconds", async () => {
    const c = collector();
    await watchPods({ timeoutSeconds: "1" }, c);
    expect((await c.end()).error).toBeNull();
    expect(server.openWatches).toBe(0);
  });

  it("feeds client-node's informer (list, then watch from the list's resourceVersion)", async () => {
    const kc = server.kubeConfig();
    const api = kc.makeApiClient(CoreV1Api);
    const informer = makeInformer(kc, "/api/v1/namespaces/default/pods", () =>
      api.listNamespacedPod({ namespace: "default" }),
    );
    const updates: string[] = [];
    let wake = () => {};
    informer.on("update", (pod) => {
      updates.push(`${pod.metadata?.name}:${pod.metadata?.labels?.app}`);
      wake();
    });
    await informer.start();
    await server.waitForWatches(1);
    server.mutatePod("default", "p2", (pod) => {
      pod.metadata = { ...pod.metadata, labels: { app: "api" } };
    });
    while (updates.length === 0) await new Promise<void>((resolve) => (wake = resolve));
    expect(updates).toEqual(["p2:api"]);
    expect(informer.list("default").map((p) => p.metadata?.name)).toEqual(["p1", "p2"]);
    await informer.stop();
  });
});
