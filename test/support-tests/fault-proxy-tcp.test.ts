// The fault proxy over plain TCP: byte-exact forwarding, delay, and a clean close.
import { spawn } from "node:child_process";
import { randomBytes } from "node:crypto";
import { createServer } from "node:net";
import { fileURLToPath } from "node:url";
import { afterEach, beforeEach, expect, it, vi } from "vitest";
import { type FaultProxy, startFaultProxy } from "../support/postgres/fault-proxy.ts";
import {
  destroyClients,
  openClient,
  readToEnd,
  resetError,
  roundTrip,
  startTarget,
  type Target,
} from "./tcp-peers.ts";

// A broken proxy tends to hang rather than fail: keep that from costing the default minute.
vi.setConfig({ testTimeout: 5_000 });

let target: Target;
let proxy: FaultProxy;

beforeEach(async () => {
  target = await startTarget("echo");
  proxy = await startFaultProxy({ host: "127.0.0.1", port: target.port });
});

afterEach(async () => {
  destroyClients();
  await proxy.close();
  await target.close();
});

it("forwards 5 MB byte-exact both ways and passes the half-close through", async () => {
  const payload = randomBytes(5 * 1024 * 1024);
  const client = await openClient(proxy.port);
  const echoed = readToEnd(client);
  client.end(payload);
  expect((await echoed).equals(payload)).toBe(true);
  expect(proxy.stats()).toMatchObject({
    connections: 1,
    bytesToTarget: payload.length,
    bytesToClient: payload.length,
    bytesDropped: 0,
  });
});

it("delays every chunk in order: a shorter delay never overtakes held bytes", async () => {
  const sink = await startTarget("sink");
  const slow = await startFaultProxy({ host: "127.0.0.1", port: sink.port });
  try {
    const client = await openClient(slow.port);
    const sent: string[] = [];
    const firstSentAt = performance.now();
    for (const [delayMs, count] of [
      [60, 5],
      [0, 5],
      [20, 5],
    ] as const) {
      slow.delay(delayMs);
      for (let i = 0; i < count; i += 1) {
        const chunk = `<${sent.length}>`;
        sent.push(chunk);
        client.write(chunk);
        // Gaps let the proxy read each write as its own chunk, so a reorder would show.
        await new Promise((resolve) => setTimeout(resolve, 3));
      }
    }
    client.end();
    await vi.waitFor(() => expect(sink.received.length).toBeGreaterThan(0), { interval: 1 });
    expect(performance.now() - firstSentAt).toBeGreaterThanOrEqual(60);
    await vi.waitFor(() => expect(Buffer.concat(sink.received).toString()).toBe(sent.join("")));
  } finally {
    await slow.close();
    await sink.close();
  }
});

it("a delay holds about 1 MB at most, pushing back on the sender, and loses nothing", async () => {
  const sink = await startTarget("sink");
  const slow = await startFaultProxy({ host: "127.0.0.1", port: sink.port });
  try {
    const payload = randomBytes(5 * 1024 * 1024);
    slow.delay(100);
    const client = await openClient(slow.port);
    client.end(payload);
    await vi.waitFor(() => expect(slow.stats().bytesHeld).toBeGreaterThan(1024 * 1024));
    // Unpaused, loopback would hand the proxy the rest of the 5 MB within these milliseconds.
    await new Promise((resolve) => setTimeout(resolve, 30));
    expect(slow.stats().bytesHeld).toBeLessThanOrEqual(1024 * 1024 + 64 * 1024);
    slow.delay(0);
    await vi.waitFor(() => expect(sink.accepted[0]?.readableEnded).toBe(true));
    expect(Buffer.concat(sink.received).equals(payload)).toBe(true);
    expect(slow.stats()).toMatchObject({ bytesToTarget: payload.length, bytesHeld: 0 });
  } finally {
    await slow.close();
    await sink.close();
  }
});

function tcpHandles(): string[] {
  return process
    .getActiveResourcesInfo()
    .filter((kind) => kind.startsWith("TCP"))
    .sort();
}

it("close ends every socket and the listener, and frees the port", async () => {
  // The previous test's target may still be releasing handles: let the loop pass its close phase.
  for (let turn = 0; turn < 2; turn += 1) await new Promise((resolve) => setImmediate(resolve));
  const before = tcpHandles();
  const own = await startFaultProxy({ host: "127.0.0.1", port: target.port });
  const idle = await openClient(own.port);
  expect(await roundTrip(idle, "ping")).toBe("ping");
  const halfClosed = await openClient(own.port, true);
  halfClosed.end();
  own.blackhole();
  const unconnected = await openClient(own.port);
  expect(tcpHandles().length).toBeGreaterThan(before.length);

  const clientsClosed = [idle, halfClosed, unconnected].map(
    (socket) => new Promise((resolve) => socket.once("close", resolve)),
  );
  await own.close();
  await Promise.all(clientsClosed);
  await vi.waitFor(() => expect(target.accepted.filter((socket) => !socket.closed)).toEqual([]));
  expect(target.accepted).toHaveLength(2);
  expect(own.stats().activeConnections).toBe(0);
  expect(tcpHandles()).toEqual(before);

  const fresh = createServer();
  await new Promise<void>((resolve, reject) => {
    fresh.once("error", reject);
    fresh.listen(own.port, "127.0.0.1", resolve);
  });
  await new Promise<void>((resolve) => fresh.close(() => resolve()));
});

it("close leaves no timer or handle that would keep a process alive", async () => {
  const script = fileURLToPath(new URL("./fault-proxy-close-child.ts", import.meta.url));
  const child = spawn(process.execPath, [script], { stdio: ["ignore", "pipe", "inherit"] });
  let stdout = "";
  child.stdout.on("data", (chunk: Buffer) => {
    stdout += chunk.toString();
  });
  // The child holds bytes in a 10 s delay: a leaked timer would keep it alive that long.
  const deadline = setTimeout(() => child.kill(), 4_000);
  const started = performance.now();
  const exitCode = await new Promise((resolve) => child.once("exit", resolve));
  clearTimeout(deadline);
  expect(exitCode).toBe(0);
  expect(performance.now() - started).toBeLessThan(4_000);
  expect(JSON.parse(stdout)).toMatchObject({ connections: 2, activeConnections: 0, bytesHeld: 0 });
});

it("moveTo resets the open connections and sends new ones to the new target", async () => {
  const other = await startTarget("sink");
  try {
    const before = await openClient(proxy.port);
    expect(await roundTrip(before, "old")).toBe("old");
    const reset = resetError(before);
    proxy.moveTo({ host: "127.0.0.1", port: other.port });
    expect((await reset).code).toBe("ECONNRESET");
    const after = await openClient(proxy.port);
    after.write("new");
    await vi.waitFor(() => expect(Buffer.concat(other.received).toString()).toBe("new"));
    expect(target.accepted).toHaveLength(1);
  } finally {
    await other.close();
  }
});
