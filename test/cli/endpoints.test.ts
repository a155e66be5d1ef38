// The sidecar's endpoints as a pod sees them: readiness through a lease-database outage (ready
// once started, and still ready while PostgreSQL is unreachable, so the pod stays in its
// Services; leadership is what the outage takes away), and a dual-stack listener.
import { afterAll, afterEach, beforeAll, expect, it } from "vitest";
import { createTestDatabase, type TestDatabase } from "../support/postgres/database.ts";
import { freePort } from "../support/postgres/embedded-postgres.ts";
import { type FaultProxy, startFaultProxy } from "../support/postgres/fault-proxy.ts";
import { type Running, startPglease, startShortLeaseRun } from "../support/processes/cli.ts";

let db: TestDatabase;
let proxy: FaultProxy;
const running: Running[] = [];

beforeAll(async () => {
  db = await createTestDatabase();
  const url = new URL(db.url);
  proxy = await startFaultProxy({ host: url.hostname, port: Number(url.port) });
});
afterEach(async () => {
  for (const r of running.splice(0)) await r.stop("SIGKILL");
});
afterAll(async () => {
  await proxy.close();
  await db.drop();
});

it("stays ready through a lease-database outage while the leader steps down", async () => {
  const { run, port } = await startShortLeaseRun("outage", { DATABASE_URL: proxy.url(db.url) });
  running.push(run);
  const get = (path: string) => fetch(`http://127.0.0.1:${port}${path}`);
  await run.waitForLog(/^acquired lease outage with fence \d+$/);
  await expect.poll(async () => (await get("/readyz")).status).toBe(200);

  proxy.blackhole();
  await run.waitForLog(/^stepped down from lease outage/, 10_000);
  // As a follower too, its calls keep failing: the store has not answered for a while.
  await run.waitForLog(/^could not (read|claim) lease outage/, 10_000);
  expect((await get("/leader")).status).toBe(503);
  const ready = await get("/readyz");
  expect(ready.status).toBe(200);
  expect(await ready.json()).toEqual({ status: "ready" });
  expect((await get("/healthz")).status).toBe(200);
});

it("listens on IPv6 and IPv4 with :PORT, as with the default address", async () => {
  const port = await freePort();
  const run = startPglease(["run", "--lease", "dual", "--http-addr", `:${port}`], { DATABASE_URL: db.url });
  running.push(run);
  await run.waitForLog(/^campaigning for dual/);
  for (const host of ["127.0.0.1", "[::1]"]) {
    expect((await fetch(`http://${host}:${port}/healthz`)).status).toBe(200);
  }
});
