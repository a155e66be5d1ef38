import { CoreV1Api, PatchStrategy, setHeaderOptions, Watch } from "@kubernetes/client-node";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { failureOf } from "../support/kube/apiserver/client.ts";
import { type KubeApiServer, startKubeApiServer } from "../support/kube/apiserver/index.ts";

let server: KubeApiServer;
let api: CoreV1Api;
const merge = setHeaderOptions("Content-Type", PatchStrategy.MergePatch);
const label = (value: string) =>
  api.patchNamespacedPod(
    { name: "p1", namespace: "default", body: { metadata: { labels: { v: value } } } },
    merge,
  );
const read = () => api.readNamespacedPod({ name: "p1", namespace: "default" });

beforeEach(async () => {
  server = await startKubeApiServer();
  api = server.kubeConfig().makeApiClient(CoreV1Api);
  server.seedPod({ metadata: { name: "p1" } });
});
afterEach(async () => {
  await server.close();
});

/** The error a fetch-based call ends with when the connection fails, with its system code if any. */
async function connectionFailure(call: Promise<unknown>): Promise<string> {
  const error = await call.then(
    () => undefined,
    (e: unknown) => e,
  );
  if (!(error instanceof Error)) throw new Error("expected a connection failure, the call succeeded");
  const cause = error.cause as { code?: string } | undefined;
  return cause?.code ?? error.message;
}

describe("failNext", () => {
  it("answers 500 the given number of times, then serves normally", async () => {
    server.faults.failNext({ status: 500, count: 2 });
    expect((await failureOf(read())).status).toMatchObject({ code: 500, reason: "InternalError" });
    expect((await failureOf(read())).code).toBe(500);
    await expect(read()).resolves.toBeDefined();
    expect(server.requests.map((r) => r.status)).toEqual([500, 500, 200]);
  });

  it("sends Retry-After with a 429", async () => {
    server.faults.failNext({ status: 429, retryAfter: 3 });
    const error = await read().catch((e: { code: number; headers: Record<string, string> }) => e);
    expect(error).toMatchObject({ code: 429, headers: { "retry-after": "3" } });
  });

  it("targets only matching requests (method, path, content type)", async () => {
    server.faults.failNext({
      match: { method: "patch", path: /\/status$/, contentType: "application/merge-patch+json" },
      status: 503,
    });
    await label("a");
    await api.patchNamespacedPodStatus(
      { name: "p1", namespace: "default", body: { status: { phase: "Running" } } },
      setHeaderOptions("Content-Type", PatchStrategy.StrategicMergePatch),
    );
    const failure = await failureOf(
      api.patchNamespacedPodStatus({ name: "p1", namespace: "default", body: { status: {} } }, merge),
    );
    expect(failure.status.reason).toBe("ServiceUnavailable");
  });

  it("in the 'after' phase commits the write and still answers with the failure", async () => {
    server.faults.failNext({ status: 504, phase: "after" });
    expect((await failureOf(label("committed"))).code).toBe(504);
    expect(server.pod("default", "p1")?.metadata?.labels?.v).toBe("committed");
  });

  it("with watchEvent fails a watch as kube-apiserver fails one it began: 200, one ERROR event, the end", async () => {
    server.faults.failNext({ status: 500, watchEvent: true, message: "etcd said no", count: 2 });
    const events: Array<{ type: string; object: unknown }> = [];
    const ended = await new Promise<unknown>((resolve) => {
      new Watch(server.kubeConfig())
        .watch(
          "/api/v1/namespaces/default/pods",
          {},
          (type, object) => events.push({ type, object }),
          resolve,
        )
        .catch(resolve);
    });
    expect(ended).toBeNull();
    expect(events).toEqual([
      {
        type: "ERROR",
        object: {
          kind: "Status",
          apiVersion: "v1",
          metadata: {},
          status: "Failure",
          message: "etcd said no",
          reason: "InternalError",
          details: {},
          code: 500,
        },
      },
    ]);
    // Anything but a watch gets the failure as its HTTP status.
    expect((await failureOf(read())).code).toBe(500);
    expect(server.requests.map((r) => `${r.verb} ${r.status}`)).toEqual(["watch 200", "get 500"]);
  });

  it("clear() removes pending failures", async () => {
    server.faults.failNext({ status: 500, count: 5 });
    server.faults.clear();
    await expect(read()).resolves.toBeDefined();
  });
});

describe("latency and hangs", () => {
  it("delays matching requests by the given time", async () => {
    server.faults.setLatency({ match: { method: "GET" }, ms: 150 });
    const start = performance.now();
    await read();
    expect(performance.now() - start).toBeGreaterThanOrEqual(145);
  });

  it("holds a request unanswered and unapplied until released", async () => {
    const hang = server.faults.hang({ match: { method: "PATCH" } });
    const pending = label("late");
    await hang.waitForHeld(1);
    expect(server.pod("default", "p1")?.metadata?.labels?.v).toBeUndefined();
    expect(server.requests.at(-1)).toMatchObject({ method: "PATCH", status: 0 });
    await expect(read()).resolves.toBeDefined();
    hang.release();
    expect((await pending).metadata?.labels?.v).toBe("late");
    await expect(label("again")).resolves.toBeDefined();
  });

  it("in the 'after' phase applies the write but withholds the answer", async () => {
    const hang = server.faults.hang({ match: { method: "PATCH" }, phase: "after" });
    const pending = label("applied");
    await hang.waitForHeld(1);
    expect(server.pod("default", "p1")?.metadata?.labels?.v).toBe("applied");
    hang.release();
    await expect(pending).resolves.toBeDefined();
  });
});

describe("connections", () => {
  async function openWatch() {
    let ended: (error: unknown) => void = () => {};
    const done = new Promise<unknown>((resolve) => {
      ended = resolve;
    });
    const controller = await new Watch(server.kubeConfig()).watch(
      "/api/v1/namespaces/default/pods",
      {},
      () => {},
      (error) => ended(error),
    );
    return { controller, done };
  }

  it("dropWatches resets open watches (the client sees an error) or ends them cleanly", async () => {
    const reset = await openWatch();
    expect(server.faults.dropWatches()).toBe(1);
    expect(await reset.done).toBeInstanceOf(Error);

    const ended = await openWatch();
    expect(server.faults.dropWatches({ mode: "end" })).toBe(1);
    expect(await ended.done).toBeNull();
    expect(server.openWatches).toBe(0);
  });

  it("goDown refuses connections and resets open watches; comeBack serves again on the same port", async () => {
    const watch = await openWatch();
    await server.faults.goDown();
    expect(await watch.done).toBeInstanceOf(Error);
    expect(await connectionFailure(read())).toBe("ECONNREFUSED");
    await server.faults.comeBack();
    await expect(read()).resolves.toBeDefined();
  });

  it("goDown in 'reset' mode accepts and resets every connection", async () => {
    await server.faults.goDown({ mode: "reset" });
    expect(await connectionFailure(read())).toMatch(/ECONNRESET|UND_ERR_SOCKET|other side closed/);
    await server.faults.comeBack();
    await expect(read()).resolves.toBeDefined();
  });
});
