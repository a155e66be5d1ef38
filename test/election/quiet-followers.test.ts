// Followers on a healthy release feed on a real PostgreSQL: they wait for a notice or the observed
// expiry instead of reading every retry interval. The follower's statements are counted on the
// wire, by a proxy in front of PostgreSQL (the one the bench counts with). Local time is a
// ManualClock; the leader renews on it too, so the observed expiry moves as it would.
import type pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type StatementCounter, startStatementCounter } from "../../bench/peers/statement-counter.ts";
import { createLeasePool } from "../../src/postgres/pool.ts";
import { PgReleaseFeed } from "../../src/postgres/release-feed.ts";
import { PgLeaseStore } from "../../src/postgres/store.ts";
import { electorHarness, until } from "../support/election/elector-harness.ts";
import { ManualClock } from "../support/manual-clock.ts";
import { dropListeners } from "../support/postgres/listen-sessions.ts";

const h = electorHarness();
let counter: StatementCounter;
let followerPool: pg.Pool;
let followerStore: PgLeaseStore;

beforeAll(async () => {
  counter = await startStatementCounter(h.db.url);
  followerPool = createLeasePool({ connectionString: counter.url(h.db.url), max: 2 });
  followerStore = new PgLeaseStore({ pool: followerPool, statementTimeoutMs: 30_000 });
});

afterAll(async () => {
  await followerPool.end();
  await counter.close();
});

const statements = () => counter.counts().statements;

async function startFeed(reconnectDelayMs = 1_000): Promise<PgReleaseFeed> {
  const feed = new PgReleaseFeed({
    connection: { connectionString: h.db.url },
    table: h.store.table,
    reconnectDelayMs,
  });
  await feed.start();
  h.cleanup(() => feed.close());
  return feed;
}

/** Moves the clock in steps, letting real I/O (the leader's renewals) finish at each. */
async function advance(clock: ManualClock, ms: number, stepMs = 500): Promise<void> {
  for (let left = ms; left > 0; left -= stepMs) {
    clock.advance(Math.min(stepMs, left));
    await until(clock, () => true, "a step");
  }
}

describe("a follower on a healthy release feed", () => {
  it("sends no statement between notices, reads at the observed expiry, and claims on the notice", async () => {
    const clock = new ManualClock();
    const feed = await startFeed();
    const a = h.elector(clock, { key: "quiet", holder: "a", releases: feed });
    a.e.start();
    await until(clock, () => a.ticks.length === 1, "a acquires");
    const b = h.elector(clock, { key: "quiet", holder: "b", releases: feed, store: followerStore });
    b.e.start();
    await until(clock, () => b.ticks.length === 1, "b's first look");
    expect(b.ticks[0]).toMatchObject({ action: "claim", outcome: "held-by-other" });
    const quietFrom = statements();

    // 14.5 s: seven retry intervals, two renewals by a; b sends nothing.
    for (const renewals of [1, 2]) {
      await advance(clock, 5_000 * renewals - clock.now());
      await until(clock, () => a.ticks.length === 1 + renewals, `renewal ${renewals}`);
    }
    await advance(clock, 14_500 - clock.now());
    expect(a.outcomes()).toEqual(["acquired", "renewed", "renewed"]);
    expect(statements()).toBe(quietFrom);
    expect(b.ticks).toHaveLength(1);

    // The expiry b observed (15 s) passes: one read, which finds the lease renewed.
    await advance(clock, 1_000);
    await until(clock, () => b.ticks.length === 2, "b reads at the observed expiry");
    expect(b.ticks[1]).toMatchObject({ action: "read", outcome: "held-by-other" });
    expect(statements()).toBe(quietFrom + 1);

    await a.e.stop();
    await until(clock, () => b.ticks.length === 3, "b hears the release");
    expect(b.ticks[2]).toMatchObject({ action: "claim", outcome: "acquired" });
    expect(statements()).toBe(quietFrom + 2);
  });

  it("a release whose notice is lost costs at most the observed expiry: the read there finds it free", async () => {
    const clock = new ManualClock();
    const feed = await startFeed();
    const other = await h.store.claim("lost-notice", "other", 15_000);
    if (!other.won) throw new Error("setup: the claim failed");
    const b = h.elector(clock, { key: "lost-notice", holder: "b", releases: feed, store: followerStore });
    b.e.start();
    await until(clock, () => b.ticks.length === 1, "b's first look");
    const observedTtl = other.ttlMs;
    // The term ends on the server without a NOTIFY: a release whose notice never arrived.
    await h.pool.query(
      "UPDATE pglease_leases SET expires_at = clock_timestamp(), acquired_at = least(acquired_at, clock_timestamp() - interval '1 microsecond') WHERE key = $1",
      ["lost-notice"],
    );
    const quietFrom = statements();
    await advance(clock, observedTtl - 1_000);
    expect(b.ticks).toHaveLength(1);
    expect(statements()).toBe(quietFrom);

    await advance(clock, 2_000);
    await until(clock, () => b.ticks.length === 2, "b looks at the observed expiry");
    expect(b.ticks[1]).toMatchObject({ action: "read", outcome: "acquired" });
    expect(b.e.status().fence).toBeGreaterThan(other.fence);
    expect(statements()).toBe(quietFrom + 2); // the read, and the claim in the same tick
  });

  it("a feed found dead makes the follower read at once and poll every retry interval until it is back", async () => {
    const clock = new ManualClock();
    // Reconnection waits a minute of real time: the test runs while the feed is down.
    const feed = await startFeed(60_000);
    await h.store.claim("feed-down", "other", 15_000);
    const b = h.elector(clock, { key: "feed-down", holder: "b", releases: feed, store: followerStore });
    b.e.start();
    await until(clock, () => b.ticks.length === 1, "b's first look");
    expect(feed.healthy()).toBe(true);
    expect(await dropListeners(h.db.url)).toBe(1);
    await until(clock, () => b.ticks.length === 2, "b reads when the feed drops");
    expect(feed.healthy()).toBe(false);
    expect(clock.now()).toBe(0);
    for (const tick of [3, 4, 5]) {
      await advance(clock, 2_000);
      await until(clock, () => b.ticks.length === tick, `poll ${tick - 2}`);
    }
    expect(b.ticks.slice(1).map((t) => t.action)).toEqual(["read", "read", "read", "read"]);
  });
});
