// The LISTEN connection finds out in seconds that it died (terminated by the server, or a network
// that silently drops everything), reconnects, and announces what it may have missed.
import pg from "pg";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { migrate } from "../../src/postgres/migrate.ts";
import { PgReleaseFeed, type PgReleaseFeedOptions, reconnectDelay } from "../../src/postgres/release-feed.ts";
import { PgLeaseStore } from "../../src/postgres/store.ts";
import { createTestDatabase, type TestDatabase } from "../support/postgres/database.ts";
import { startFaultProxy } from "../support/postgres/fault-proxy.ts";

let db: TestDatabase;
let pool: pg.Pool;
let store: PgLeaseStore;
const feeds: PgReleaseFeed[] = [];

beforeAll(async () => {
  db = await createTestDatabase();
  pool = new pg.Pool({ connectionString: db.url, max: 2 });
  store = new PgLeaseStore({ pool, statementTimeoutMs: 5_000 });
  await migrate(pool, store.table);
});

afterEach(async () => {
  await Promise.all(feeds.splice(0).map((f) => f.close()));
});

afterAll(async () => {
  await pool.end();
  await db.drop();
});

/** A started feed recording what it announces, its errors and its reconnections. */
async function recordingFeed(options: Partial<PgReleaseFeedOptions> & { url?: string } = {}) {
  const seen = { keys: [] as string[], errors: [] as Error[], reconnects: 0 };
  const feed = new PgReleaseFeed({
    connection: { connectionString: options.url ?? db.url },
    table: store.table,
    reconnectDelayMs: 100,
    ...options,
    onError: (error) => seen.errors.push(error),
    onReconnect: () => seen.reconnects++,
  });
  feeds.push(feed);
  feed.subscribe((key) => seen.keys.push(key));
  await feed.start();
  return { feed, seen };
}

async function heldThenReleased(key: string): Promise<void> {
  const claim = await store.claim(key, "a", 10_000);
  if (!claim.won) throw new Error("claim failed");
  expect(await store.release(key, "a", claim.fence)).toBe(true);
}

const LISTENERS = `SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND application_name = 'pglease-listen'`;

describe("a listening connection the server terminates", () => {
  it("reconnects, announces the release it missed meanwhile, and hears the next ones", async () => {
    const { seen } = await recordingFeed({ reconnectDelayMs: 300 });
    await heldThenReleased("before");
    await expect.poll(() => seen.keys).toEqual(["before"]);
    const claim = await store.claim("missed", "a", 10_000);
    if (!claim.won) throw new Error("claim failed");

    const { rows } = await pool.query(`SELECT pg_terminate_backend(pid) FROM (${LISTENERS}) l`);
    expect(rows).toHaveLength(1);
    await expect.poll(() => seen.errors.length).toBe(1);
    expect(seen.errors[0]).toMatchObject({ code: "57P01" });
    // Released while nobody listened: its notice is lost.
    expect(await store.release("missed", "a", claim.fence)).toBe(true);
    await expect.poll(() => seen.reconnects).toBe(1);
    expect(seen.keys).toEqual(expect.arrayContaining(["before", "missed"]));

    const heard = seen.keys.length;
    await heldThenReleased("after");
    await expect.poll(() => seen.keys.slice(heard)).toEqual(["after"]);
  });
});

describe("a listening connection into a black hole", () => {
  it("is given up within seconds, and listening resumes once the network heals", async () => {
    const url = new URL(db.url);
    const proxy = await startFaultProxy({ host: url.hostname, port: Number(url.port) });
    try {
      const { seen } = await recordingFeed({
        url: proxy.url(db.url),
        pingIntervalMs: 500,
        pingTimeoutMs: 500,
      });
      const before = await pool.query(LISTENERS);
      expect(before.rows).toHaveLength(1);
      proxy.blackhole();
      const cut = performance.now();
      await expect.poll(() => seen.errors.length, { timeout: 5_000, interval: 20 }).toBeGreaterThan(0);
      // One ping interval to send it and one timeout to give up on it (1 s), with room for a loaded host.
      expect(performance.now() - cut).toBeLessThan(3_000);
      expect(seen.errors[0]?.message).toMatch(/timeout/i);
      proxy.heal();
      await expect.poll(() => seen.reconnects, { timeout: 10_000 }).toBe(1);
      const heard = seen.keys.length;
      await heldThenReleased("healed");
      await expect.poll(() => seen.keys.slice(heard)).toEqual(["healed"]);
    } finally {
      await proxy.close();
    }
  });
});

describe("reconnecting after failures", () => {
  it("doubles the wait from the base after each failed attempt, up to 30 s, and starts again at the base", () => {
    expect([0, 1, 2, 3, 4, 5, 6, 50].map((failed) => reconnectDelay(failed, 1_000))).toEqual([
      1_000, 2_000, 4_000, 8_000, 16_000, 30_000, 30_000, 30_000,
    ]);
    expect(reconnectDelay(0, 10)).toBe(10);
  });

  // Found by the chaos run under --session-takeover: nobody claims without a notice session, so
  // after a 3.9 s PostgreSQL restart the attempts at 1, 3 and 7 s left the lease leaderless 3.3 s
  // after the server was back (bound: lease + 1 s = 3 s).
  it("keeps to the base wait under session takeover, where every claim waits for this session", () => {
    expect([0, 1, 2, 3, 50].map((failed) => reconnectDelay(failed, 1_000, { pinnedSession: true }))).toEqual([
      1_000, 1_000, 1_000, 1_000, 1_000,
    ]);
  });
});
