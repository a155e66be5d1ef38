// The elector loop on a real PostgreSQL. Local time is a ManualClock moved by the test;
// only database round trips take real time, and the test waits for those, never for leases.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Elector, type LeaderTerm } from "../../src/election/elector.ts";
import { createLeasePool } from "../../src/postgres/pool.ts";
import { PgReleaseFeed } from "../../src/postgres/release-feed.ts";
import { PgLeaseStore } from "../../src/postgres/store.ts";
import { electorHarness, until } from "../support/election/elector-harness.ts";
import { ManualClock } from "../support/manual-clock.ts";
import { type FaultProxy, startFaultProxy } from "../support/postgres/fault-proxy.ts";

const h = electorHarness();
const elector = (clock: ManualClock, options: Parameters<typeof h.elector>[1]) =>
  h.elector(clock, { lead: undefined, ...options });

describe("with an injected clock", () => {
  it("acquires, renews on schedule, and releases on stop", async () => {
    const clock = new ManualClock();
    const a = elector(clock, { key: "solo", holder: "a" });
    a.e.start();
    await until(clock, () => a.ticks.length === 1, "first claim");
    expect(a.outcomes()).toEqual(["acquired"]);
    expect(a.e.status()).toMatchObject({ role: "leader", leader: "a", deadlineInMs: 10_000 });

    clock.advance(4_999);
    expect(a.ticks).toHaveLength(1);
    clock.advance(1);
    await until(clock, () => a.ticks.length === 2, "renew");
    clock.advance(5_000);
    await until(clock, () => a.ticks.length === 3, "second renew");
    expect(a.outcomes()).toEqual(["acquired", "renewed", "renewed"]);
    expect(a.ticks[1]?.sentence).toMatch(
      new RegExp(`^renewed lease solo with fence ${a.e.status().fence}, valid for 1[45]\\.\\ds$`),
    );

    await a.e.stop();
    expect(a.outcomes().at(-1)).toBe("released");
    expect((await h.store.read("solo"))?.ttlMs).toBeLessThanOrEqual(0);
    expect(clock.pendingTimers()).toBe(0);
  });

  it("a follower waits on a healthy feed, and takes over on the release notice with the next fence", async () => {
    const clock = new ManualClock();
    const feed = new PgReleaseFeed({ connection: { connectionString: h.db.url }, table: h.store.table });
    await feed.start();
    h.cleanup(() => feed.close());
    const a = elector(clock, { key: "handover", holder: "a", releases: feed });
    const b = elector(clock, { key: "handover", holder: "b", releases: feed });
    a.e.start();
    await until(clock, () => a.ticks.length === 1, "a claims");
    const aFence = a.e.status().fence ?? Number.NaN;
    b.e.start();
    await until(clock, () => b.ticks.length === 1, "b claims");
    expect(b.outcomes()).toEqual(["held-by-other"]);
    expect(b.ticks[0]?.action).toBe("claim");
    clock.advance(2_000);
    await until(clock, () => a.ticks.length === 1, "a retry interval passes");
    // Notices are heard: no poll at the retry interval.
    expect(b.ticks).toHaveLength(1);

    await a.e.stop();
    await until(clock, () => b.ticks.length === 2, "b hears the release");
    // The notice says the lease is free: b claims at once, reading nothing first.
    expect(b.ticks[1]).toMatchObject({ action: "claim", outcome: "acquired" });
    expect(b.e.status().fence).toBeGreaterThan(aFence);
  });

  it("hands leader work the fence and a signal that aborts on a lost renew, then campaigns again", async () => {
    const clock = new ManualClock();
    const terms: LeaderTerm[] = [];
    const a = elector(clock, { key: "lost", holder: "a", lead: (t) => terms.push(t) });
    a.e.start();
    await until(clock, () => terms.length === 1, "work starts");
    expect(terms[0]).toMatchObject({ key: "lost", holder: "a", fence: expect.any(Number) });
    expect(terms[0]?.signal.aborted).toBe(false);

    await h.store.forceRelease("lost");
    const intruder = await h.store.claim("lost", "intruder", 15_000);
    expect(intruder.won && intruder.fence).toBeGreaterThan(terms[0]?.fence ?? Number.NaN);
    clock.advance(5_000);
    await until(clock, () => a.ticks.length >= 3, "renew fails, then a look");
    expect(a.outcomes().slice(0, 3)).toEqual(["acquired", "lost", "held-by-other"]);
    expect(terms[0]?.signal.aborted).toBe(true);
    expect(a.e.status()).toMatchObject({
      role: "follower",
      leader: "intruder",
      fence: null,
      leaderFence: intruder.fence,
    });
  });

  it("stopping never stretches leadership: stuck work and a stuck demotion end at the local deadline", async () => {
    const clock = new ManualClock();
    const a = elector(clock, {
      key: "slow-stop",
      holder: "a",
      stopTimeoutMs: 60_000,
      lead: () => new Promise(() => {}), // ignores its signal
      beforeRelease: () => new Promise(() => {}), // never demotes
    });
    a.e.start();
    await until(clock, () => a.ticks.length === 1, "acquire");
    clock.advance(4_999);
    let stopped = false;
    void a.e.stop().then(() => {
      stopped = true;
    });
    await until(clock, () => a.e.isLeader(), "stop has begun");
    clock.advance(5_000);
    expect(a.e.isLeader()).toBe(true);
    clock.advance(1);
    expect(a.e.isLeader()).toBe(false);
    await until(clock, () => stopped, "stop finishes");
    // The deadline ended the term here; the release still ends it on the server, reporting nothing new.
    expect(a.outcomes()).toEqual(["acquired", "stepped-down"]);
    expect((await h.store.read("slow-stop"))?.ttlMs).toBeLessThanOrEqual(0);
    expect(clock.pendingTimers()).toBe(0);
  });

  it("a leader hears an operator's release of its lease and steps down at once", async () => {
    const clock = new ManualClock();
    const feed = new PgReleaseFeed({ connection: { connectionString: h.db.url }, table: h.store.table });
    await feed.start();
    h.cleanup(() => feed.close());
    const a = elector(clock, { key: "forced", holder: "a", releases: feed });
    a.e.start();
    await until(clock, () => a.ticks.length === 1, "acquire");
    await h.store.forceRelease("forced");
    await until(clock, () => a.ticks.length >= 2, "the notice wakes the leader");
    expect(a.ticks[1]).toMatchObject({ action: "renew", outcome: "lost" });
  });

  describe("cut off from PostgreSQL", () => {
    let proxy: FaultProxy;
    beforeAll(async () => {
      const url = new URL(h.db.url);
      proxy = await startFaultProxy({ host: url.hostname, port: Number(url.port) });
    });
    afterAll(async () => {
      await proxy.close();
    });

    it("steps down at its local deadline while calls hang, and the signal is aborted by then", async () => {
      const clock = new ManualClock();
      const cutPool = createLeasePool({ connectionString: proxy.url(h.db.url), max: 2 });
      const cutStore = new PgLeaseStore({ pool: cutPool, statementTimeoutMs: 60_000 });
      h.cleanup(() => cutPool.end());
      const terms: LeaderTerm[] = [];
      const a = elector(clock, { key: "cut", holder: "a", store: cutStore, lead: (t) => terms.push(t) });
      // Healing resets the blackholed sockets, so the calls still hanging fail and stop() can finish.
      h.cleanup(() => proxy.heal());
      a.e.start();
      await until(clock, () => a.ticks.length === 1, "acquire");
      const deadline = a.e.status().deadlineInMs ?? 0;
      expect(deadline).toBe(10_000);

      proxy.blackhole();
      clock.advance(5_000); // the renew goes out and hangs
      clock.advance(a.e.timing.callTimeoutMs);
      await until(clock, () => a.ticks.length === 2, "renew times out on the elector's clock");
      expect(a.ticks[1]?.outcome).toBe("transient-error");
      expect(terms[0]?.signal.aborted).toBe(false);

      clock.advance(deadline - 5_000 - a.e.timing.callTimeoutMs - 1);
      expect(a.e.isLeader()).toBe(true);
      const fence = terms[0]?.fence;
      expect(a.e.status()).toMatchObject({ role: "leader", fence, deadlineInMs: 1 });
      clock.advance(1);
      expect(a.e.isLeader()).toBe(false);
      expect(terms[0]?.signal.aborted).toBe(true);
      const down = a.ticks.find((t) => t.outcome === "stepped-down");
      expect(down?.sentence).toBe(
        `stepped down from lease cut (fence ${fence}): no successful renew before the local deadline`,
      );
    });

    it("a release that fails while stopping still ends leadership, with nothing left scheduled", async () => {
      const clock = new ManualClock();
      const cutPool = createLeasePool({ connectionString: proxy.url(h.db.url), max: 2 });
      h.cleanup(() => cutPool.end());
      const cutStore = new PgLeaseStore({ pool: cutPool, statementTimeoutMs: 60_000 });
      const a = elector(clock, { key: "cut-release", holder: "a", store: cutStore });
      h.cleanup(() => proxy.heal());
      a.e.start();
      await until(clock, () => a.ticks.length === 1, "acquire");
      const fence = a.e.status().fence;
      proxy.blackhole();
      let stopped = false;
      void a.e.stop().then(() => {
        stopped = true;
      });
      // The release hangs until the elector's own call deadline passes on its clock.
      await until(
        clock,
        () => {
          clock.advance(100);
          return stopped;
        },
        "stop finishes",
      );
      expect(a.e.isLeader()).toBe(false);
      expect(a.ticks.at(-1)?.sentence).toMatch(
        new RegExp(
          `^stopped leading lease cut-release \\(fence ${fence}\\) but could not release it \\(no answer within \\d+ ms\\); it ends on the server at its expiry$`,
        ),
      );
      expect(clock.pendingTimers()).toBe(0);
    });
  });
});

describe("in real time", () => {
  it("a leader cut off from PostgreSQL stops leading before the server-side expiry; another takes over after it", async () => {
    const url = new URL(h.db.url);
    const proxy = await startFaultProxy({ host: url.hostname, port: Number(url.port) });
    const cutPool = createLeasePool({ connectionString: proxy.url(h.db.url), max: 2 });
    h.cleanup(() => cutPool.end());
    h.cleanup(() => proxy.close());
    const fast = {
      leaseDurationMs: 1_500,
      renewIntervalMs: 400,
      retryIntervalMs: 100,
      safetyMarginMs: 400,
      callTimeoutMs: 150,
    };
    // Only the server's clock is compared with the server's times: the test may run on another host.
    const serverNow = async () =>
      (await h.pool.query<{ t: Date }>("SELECT clock_timestamp() AS t")).rows[0]?.t.getTime() ?? Number.NaN;
    const events: Array<{
      who: string;
      outcome: string;
      fence: number | null;
      expiresAt?: number;
      acquiredAt?: number;
      /** Read right after the tick: a bound on the server's time at the tick, from above. */
      serverAfter?: Promise<number>;
    }> = [];
    const make = (holder: string, s: PgLeaseStore) => {
      const e = new Elector({ key: "real-cut", holder, store: s, ...fast });
      e.on("tick", (t) =>
        events.push({
          who: holder,
          outcome: t.outcome,
          fence: e.status().fence,
          ...(t.state.term
            ? { expiresAt: t.state.term.expiresAt.getTime(), acquiredAt: t.state.term.acquiredAt.getTime() }
            : {}),
          ...(t.outcome === "stepped-down" ? { serverAfter: serverNow() } : {}),
        }),
      );
      h.cleanup(() => e.stop());
      return e;
    };
    const a = make("a", new PgLeaseStore({ pool: cutPool, statementTimeoutMs: 150 }));
    a.start();
    await expect.poll(() => a.isLeader(), { timeout: 5_000 }).toBe(true);
    const b = make("b", h.store);
    b.start();
    await expect.poll(() => events.some((e) => e.who === "b"), { timeout: 5_000 }).toBe(true);

    proxy.blackhole();
    await expect.poll(() => b.isLeader(), { timeout: 10_000 }).toBe(true);
    // The server's expiry of a's last successful claim or renew: the end of a's term.
    const lastExpiry = Math.max(
      ...events.filter((e) => e.who === "a" && e.expiresAt).map((e) => e.expiresAt ?? 0),
    );

    const aDown = events.findIndex((e) => e.who === "a" && e.outcome === "stepped-down");
    const bUp = events.findIndex((e) => e.who === "b" && e.outcome === "acquired");
    expect(aDown).toBeGreaterThanOrEqual(0);
    expect(aDown).toBeLessThan(bUp);
    // a gave up before its term ended on the server (the server's clock, read just after the
    // step-down, was still before the expiry), and b's term began on the server only after it.
    expect(await events[aDown]?.serverAfter).toBeLessThan(lastExpiry);
    expect(events[bUp]?.acquiredAt).toBeGreaterThanOrEqual(lastExpiry);
    expect(events[bUp]?.fence).toBeGreaterThan(
      events.find((e) => e.who === "a" && e.outcome === "acquired")?.fence ?? Number.NaN,
    );
    expect((await h.store.read("real-cut"))?.holder).toBe("b");
  });

  it("many named leases in one process share one small pool", async () => {
    const small = createLeasePool({ connectionString: h.db.url, max: 2 });
    h.cleanup(() => small.end());
    const shared = new PgLeaseStore({ pool: small, statementTimeoutMs: 2_000 });
    const electors = Array.from({ length: 30 }, (_, i) => {
      const e = new Elector({ key: `many-${i}`, holder: "one-process", store: shared });
      h.cleanup(() => e.stop());
      e.start();
      return e;
    });
    await expect.poll(() => electors.every((e) => e.isLeader()), { timeout: 10_000 }).toBe(true);
    expect(small.totalCount).toBeLessThanOrEqual(2);
  });
});
