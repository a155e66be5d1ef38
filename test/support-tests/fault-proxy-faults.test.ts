// The fault proxy's cut and blackhole over plain TCP, where every reset can be observed.
import { afterEach, beforeEach, expect, it, vi } from "vitest";
import { type FaultProxy, resetSocket, startFaultProxy } from "../support/postgres/fault-proxy.ts";
import {
  destroyClients,
  openClient,
  refusedConnection,
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

it("cut resets open connections on both sides and refuses new ones until heal", async () => {
  const client = await openClient(proxy.port);
  expect(await roundTrip(client, "before")).toBe("before");
  const clientReset = resetError(client);
  const targetSide = target.accepted[0];
  if (targetSide === undefined) throw new Error("target saw no connection");
  const targetReset = resetError(targetSide);
  proxy.cut();
  expect((await clientReset).code).toBe("ECONNRESET");
  expect((await targetReset).code).toBe("ECONNRESET");

  expect((await refusedConnection(proxy.port)).code).toBe("ECONNRESET");
  expect(proxy.stats()).toMatchObject({ mode: "cut", connections: 2, refusedConnections: 1 });
  expect(target.accepted).toHaveLength(1);

  proxy.heal();
  expect(await roundTrip(await openClient(proxy.port), "after")).toBe("after");
});

it("blackhole drops bytes both ways, connects nobody, and heal resets what it swallowed", async () => {
  const client = await openClient(proxy.port);
  expect(await roundTrip(client, "before")).toBe("before");
  const onClient = vi.fn();
  client.on("data", onClient);
  proxy.blackhole();
  client.write("swallowed");
  await vi.waitFor(() => expect(proxy.stats().bytesDropped).toBe("swallowed".length));

  const lateClient = await openClient(proxy.port);
  lateClient.write("late");
  await vi.waitFor(() => expect(proxy.stats().bytesDropped).toBe("swallowed".length + "late".length));
  expect(target.accepted).toHaveLength(1);
  expect(onClient).not.toHaveBeenCalled();
  expect(proxy.stats()).toMatchObject({ mode: "blackhole", activeConnections: 2, bytesToTarget: 6 });

  const targetSide = target.accepted[0];
  if (targetSide === undefined) throw new Error("target saw no connection");
  const onTargetClose = vi.fn();
  targetSide.on("close", onTargetClose);
  const resets = [resetError(client), resetError(lateClient)];
  proxy.heal();
  expect((await Promise.all(resets)).map((error) => error.code)).toEqual(["ECONNRESET", "ECONNRESET"]);
  await vi.waitFor(() => expect(onTargetClose).toHaveBeenCalled());
  expect(await roundTrip(await openClient(proxy.port), "after")).toBe("after");
});

it("a client that gives up in a blackhole leaves the target's session open until heal", async () => {
  const client = await openClient(proxy.port);
  expect(await roundTrip(client, "before")).toBe("before");
  const targetSide = target.accepted[0];
  if (targetSide === undefined) throw new Error("target saw no connection");
  proxy.blackhole();
  client.resetAndDestroy();
  await vi.waitFor(() => expect(proxy.stats().activeConnections).toBe(0));
  expect(targetSide.closed).toBe(false);
  const targetReset = resetError(targetSide);
  proxy.heal();
  expect((await targetReset).code).toBe("ECONNRESET");
});

it("resets the client when the target refuses the connection", async () => {
  const gone = await startTarget("echo");
  await gone.close();
  const nowhere = await startFaultProxy({ host: "127.0.0.1", port: gone.port });
  try {
    expect((await refusedConnection(nowhere.port)).code).toBe("ECONNRESET");
  } finally {
    await nowhere.close();
  }
});

it("cut still ends a connection whose target already half-closed it", async () => {
  const quiet = await startTarget("quiet");
  const own = await startFaultProxy({ host: "127.0.0.1", port: quiet.port });
  try {
    const client = await openClient(own.port, true);
    await new Promise((resolve) => client.once("end", resolve));
    // The proxy already sent its FIN to this client; the reset must still reach it.
    own.cut();
    const clientReset = resetError(client);
    client.write("anyone there?");
    expect(["ECONNRESET", "EPIPE"]).toContain((await clientReset).code);
  } finally {
    await own.close();
    await quiet.close();
  }
});

it("resetSocket closes a socket whose FIN is still queued, where a reset is refused", async () => {
  const client = await openClient(proxy.port);
  const closed = new Promise((resolve) => client.once("close", resolve));
  client.end();
  resetSocket(client);
  await closed;
});

it("blackholeMatching silences only the connections whose first bytes carry the marker", async () => {
  const listen = await openClient(proxy.port);
  expect(await roundTrip(listen, "startup application_name pglease-listen")).toBe(
    "startup application_name pglease-listen",
  );
  const pool = await openClient(proxy.port);
  expect(await roundTrip(pool, "startup application_name pglease")).toBe("startup application_name pglease");
  const onListen = vi.fn();
  listen.on("data", onListen);

  const silenced = proxy.blackholeMatching("pglease-listen");
  expect(silenced.count).toBe(1);
  listen.write("ping");
  await vi.waitFor(() => expect(proxy.stats().bytesDropped).toBe("ping".length));
  expect(onListen).not.toHaveBeenCalled();
  // The other connection, and the proxy as a whole, go on forwarding.
  expect(await roundTrip(pool, "renew")).toBe("renew");
  expect(proxy.stats().mode).toBe("forwarding");

  const reset = resetError(listen);
  silenced.heal();
  expect((await reset).code).toBe("ECONNRESET");
  expect(await roundTrip(pool, "still")).toBe("still");
});
