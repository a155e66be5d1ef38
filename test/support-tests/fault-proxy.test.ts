// The fault proxy in front of the real PostgreSQL: what pg sees when the link is slow,
// cut or blackholed, and that it recovers after heal.
import pg from "pg";
import { afterAll, afterEach, beforeAll, beforeEach, expect, it, vi } from "vitest";
import { createTestDatabase, type TestDatabase } from "../support/postgres/database.ts";
import { type FaultProxy, startFaultProxy } from "../support/postgres/fault-proxy.ts";

// A broken proxy tends to hang rather than fail: keep that from costing the default minute.
vi.setConfig({ testTimeout: 5_000 });

let db: TestDatabase;
let proxy: FaultProxy;
const pools: pg.Pool[] = [];

beforeAll(async () => {
  db = await createTestDatabase();
});
afterAll(async () => {
  await db.drop();
});

beforeEach(async () => {
  const target = new URL(db.url);
  proxy = await startFaultProxy({ host: target.hostname, port: Number(target.port) });
});
afterEach(async () => {
  // Proxy first: a pool ending during a blackhole would wait for an answer that never comes.
  await proxy.close();
  await Promise.all(pools.splice(0).map((pool) => pool.end()));
});

function poolThroughProxy(options: pg.PoolConfig = {}): { pool: pg.Pool; errors: Error[] } {
  const pool = new pg.Pool({ connectionString: proxy.url(db.url), max: 1, ...options });
  const errors: Error[] = [];
  // Idle connections the proxy breaks report here; without a listener they would crash the run.
  pool.on("error", (error) => errors.push(error));
  pools.push(pool);
  return { pool, errors };
}

async function elapsedMs(work: () => Promise<unknown>): Promise<number> {
  const started = performance.now();
  await work();
  return performance.now() - started;
}

it("passes queries through, a pool of one on one connection", async () => {
  const { pool } = poolThroughProxy();
  for (let i = 0; i < 3; i += 1) {
    const { rows } = await pool.query<{ db: string }>("SELECT current_database() AS db");
    expect(rows[0]?.db).toBe(db.name);
  }
  const sums = await Promise.all(
    [1, 2, 3].map((n) => pool.query<{ n: number }>("SELECT $1::int + 1 AS n", [n])),
  );
  expect(sums.map(({ rows }) => rows[0]?.n)).toEqual([2, 3, 4]);
  const stats = proxy.stats();
  expect(stats).toMatchObject({ connections: 1, activeConnections: 1, bytesDropped: 0 });
  expect(stats.bytesToTarget).toBeGreaterThan(0);
  expect(stats.bytesToClient).toBeGreaterThan(0);
});

it("delay(200) makes a SELECT 1 take at least 200 ms", async () => {
  const { pool } = poolThroughProxy();
  await pool.query("SELECT 1");
  proxy.delay(200);
  expect(await elapsedMs(() => pool.query("SELECT 1"))).toBeGreaterThanOrEqual(200);
  expect(proxy.stats().delayMs).toBe(200);
});

it("cut fails an in-flight query and a new connection fast, and heal restores service", async () => {
  const { pool } = poolThroughProxy();
  await pool.query("SELECT 1");
  const sentBefore = proxy.stats().bytesToTarget;
  const started = performance.now();
  const inFlight = pool.query("SELECT pg_sleep(2)");
  await vi.waitFor(() => expect(proxy.stats().bytesToTarget).toBeGreaterThan(sentBefore), { interval: 1 });
  proxy.cut();
  await expect(inFlight).rejects.toThrow(/Connection terminated|ECONNRESET/);
  expect(
    await elapsedMs(() => expect(pool.query("SELECT 1")).rejects.toThrow(/Connection terminated|ECONNRESET/)),
  ).toBeLessThan(1_000);
  // The server was asleep for 2 s: the query failed because of the cut, not after it ended.
  expect(performance.now() - started).toBeLessThan(1_000);
  expect(proxy.stats().refusedConnections).toBe(1);

  proxy.heal();
  expect((await pool.query<{ one: number }>("SELECT 1 AS one")).rows[0]?.one).toBe(1);
});

it("blackhole hangs a query until query_timeout and a connect until its timeout; heal lets a new connection work", async () => {
  const { pool } = poolThroughProxy({ query_timeout: 300, connectionTimeoutMillis: 300 });
  await pool.query("SELECT 1");
  proxy.blackhole();
  const hung = await elapsedMs(() => expect(pool.query("SELECT 1")).rejects.toThrow(/Query read timeout/));
  expect(hung).toBeGreaterThanOrEqual(295);

  const client = new pg.Client({ connectionString: proxy.url(db.url), connectionTimeoutMillis: 300 });
  await expect(client.connect()).rejects.toThrow(/timeout/);
  expect(proxy.stats()).toMatchObject({ mode: "blackhole", connections: 2 });
  expect(proxy.stats().bytesDropped).toBeGreaterThan(0);

  proxy.heal();
  expect((await pool.query<{ one: number }>("SELECT 1 AS one")).rows[0]?.one).toBe(1);
  expect(proxy.stats().connections).toBe(3);
});

it("close drops the pool's connection and leaves nothing open", async () => {
  const { pool, errors } = poolThroughProxy();
  await pool.query("SELECT 1");
  await proxy.close();
  expect(proxy.stats().activeConnections).toBe(0);
  await vi.waitFor(() => expect(errors).toHaveLength(1));
  await expect(pool.query("SELECT 1")).rejects.toThrow(/ECONNREFUSED/);
});

it("url() rewrites host and port only, and refuses a URL that would bypass it", () => {
  const rewritten = new URL(proxy.url("postgres://app:s3cret@db.example:5432/leases?sslmode=disable"));
  expect(rewritten.host).toBe(`127.0.0.1:${proxy.port}`);
  expect(rewritten.username).toBe("app");
  expect(rewritten.password).toBe("s3cret");
  expect(rewritten.pathname).toBe("/leases");
  expect(rewritten.searchParams.get("sslmode")).toBe("disable");
  expect(() => proxy.url("postgres://app:s3cret@x/db?host=/run/postgresql")).toThrow(/query parameter/);
  expect(() => proxy.url("not a url with s3cret")).toThrow(/baseUrl is not a URL/);
  expect(() => proxy.url("not a url with s3cret")).not.toThrow(/s3cret/);
  expect(() => proxy.delay(-1)).toThrow(/ms must be a finite number >= 0/);
});
