import { CoreV1Api, Watch } from "@kubernetes/client-node";
import { expect, it } from "vitest";
import { startKubeApiServer } from "../support/kube/apiserver/index.ts";

function tcpHandles(): number {
  return process.getActiveResourcesInfo().filter((r) => r === "TCPSocketWrap" || r === "TCPServerWrap")
    .length;
}

/** Sockets close on the next turns of the event loop; give them a bounded number of turns, no timer. */
async function settleTo(expected: number): Promise<number> {
  for (let turn = 0; turn < 1000 && tcpHandles() > expected; turn++) {
    await new Promise<void>((resolve) => setImmediate(resolve));
  }
  return tcpHandles();
}

it("close() ends held requests, watches and idle connections, leaving no open handle", async () => {
  const baseline = tcpHandles();
  const server = await startKubeApiServer();
  const api = server.kubeConfig().makeApiClient(CoreV1Api);
  server.seedPod({ metadata: { name: "p1" } });
  await api.readNamespacedPod({ name: "p1", namespace: "default" });

  let watchEnded: (error: unknown) => void = () => {};
  const watchDone = new Promise<unknown>((resolve) => {
    watchEnded = resolve;
  });
  await new Watch(server.kubeConfig()).watch("/api/v1/namespaces/default/pods", {}, () => {}, watchEnded);
  const hang = server.faults.hang({ match: { method: "GET", watch: false } });
  const held = api.readNamespacedPod({ name: "p1", namespace: "default" }).then(
    () => "answered",
    () => "failed",
  );
  await hang.waitForHeld(1);
  server.faults.setLatency({ ms: 60_000 });
  const latePending = api.listNamespacedPod({ namespace: "default" }).catch(() => "failed");
  expect(tcpHandles()).toBeGreaterThan(baseline);

  await server.close();

  expect(await latePending).toBe("failed");

  expect(await held).toBe("failed");
  expect(await watchDone).toBeNull();
  expect(await settleTo(baseline)).toBe(baseline);
  const refused = await fetch(server.url).then(
    () => "connected",
    (e: Error) => (e.cause as { code?: string }).code,
  );
  expect(refused).toBe("ECONNREFUSED");
});

it("a fixed port is honoured and freed by close()", async () => {
  const first = await startKubeApiServer();
  const port = Number(new URL(first.url).port);
  await first.close();
  const second = await startKubeApiServer({ port });
  expect(second.url).toBe(`http://127.0.0.1:${port}`);
  await second.close();
});
