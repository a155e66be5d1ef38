// Terms and their work: every lead() gets a fence higher than all before it, a new term's work
// waits for the previous one, a claim answered too late never starts work, a notice is only a
// hint, and neither a throwing lead() nor a throwing listener breaks the election.
import { describe, expect, it } from "vitest";
import type { LeaderTerm } from "../../src/election/elector.ts";
import { PgReleaseFeed } from "../../src/postgres/release-feed.ts";
import { electorHarness, nextTurn, until } from "../support/election/elector-harness.ts";
import { HoldingStore } from "../support/election/holding-store.ts";
import { ManualClock } from "../support/manual-clock.ts";
import { dropListeners } from "../support/postgres/listen-sessions.ts";

const h = electorHarness();

describe("terms", () => {
  it("a leader that stepped down and claims its own live row again leads with a higher fence", async () => {
    const clock = new ManualClock();
    const held = new HoldingStore(h.store);
    const a = h.elector(clock, { key: "fresh-fence", holder: "a", store: held });
    h.cleanup(() => held.deliverAll());
    a.e.start();
    await until(clock, () => a.ticks.length === 1, "acquire");
    held.hold("renew"); // renews reach the server but never come back: it steps down at 10 s
    for (let i = 0; i < 100 && !a.outcomes().includes("stepped-down"); i++) {
      clock.advance(100);
      await until(clock, () => held.quiet(), "calls answered or held");
    }
    expect((await h.store.read("fresh-fence"))?.holder).toBe("a"); // still live on the server
    for (let i = 0; i < 40 && a.terms.length < 2; i++) {
      clock.advance(250);
      await until(clock, () => held.quiet(), "calls answered or held");
    }
    expect(a.terms).toHaveLength(2);
    expect(a.terms[1]?.fence).toBeGreaterThan(a.terms[0]?.fence ?? Number.NaN);
    expect(a.terms[0]?.signal.aborted).toBe(true);
    expect(a.terms[1]?.signal.aborted).toBe(false);
  });

  it("a new term's work starts only once the previous work returned, or its bounded wait passed", async () => {
    const clock = new ManualClock();
    const terms: LeaderTerm[] = [];
    const a = h.elector(clock, {
      key: "work-waits",
      holder: "a",
      stopTimeoutMs: 3_000,
      // The first term's work ignores its signal and never returns.
      lead: (t) => {
        terms.push(t);
        return terms.length === 1 ? new Promise(() => {}) : undefined;
      },
    });
    a.e.start();
    await until(clock, () => terms.length === 1, "the first work starts");
    await h.store.forceRelease("work-waits");
    clock.advance(5_000); // the renew finds no row; the claim right after wins a higher fence
    await until(clock, () => a.outcomes().filter((o) => o === "acquired").length === 2, "the second term");
    expect(a.outcomes()).toEqual(["acquired", "lost", "acquired"]);
    expect(terms[0]?.signal.aborted).toBe(true);
    expect(terms).toHaveLength(1);
    clock.advance(2_999);
    await nextTurn();
    expect(terms).toHaveLength(1);
    clock.advance(1);
    await until(clock, () => terms.length === 2, "the second work starts after the bounded wait");
    expect(terms[1]?.fence).toBeGreaterThan(terms[0]?.fence ?? Number.NaN);
    expect(terms[1]?.signal.aborted).toBe(false);
  });

  it("a claim answered only after its timeout starts no work; the elector releases it and leads on a fresh fence", async () => {
    const clock = new ManualClock();
    const held = new HoldingStore(h.store);
    held.hold("claim");
    const a = h.elector(clock, { key: "timed-out-claim", holder: "a", store: held });
    h.cleanup(() => held.deliverAll());
    a.e.start();
    await until(clock, () => held.held("claim") === 1, "the claim goes out");
    await held.answered("claim"); // committed in a's name, the answer still held
    const committed = await h.store.read("timed-out-claim");
    expect(committed).toMatchObject({ holder: "a" });
    const late = committed?.fence ?? Number.NaN;
    clock.advance(a.e.timing.callTimeoutMs);
    await until(clock, () => a.ticks.length === 1, "the claim times out");
    expect(a.ticks[0]?.outcome).toBe("transient-error");
    held.pass("claim");
    clock.advance(a.e.timing.retryIntervalMs);
    await nextTurn();
    // The next tick waits for the unanswered claim before anything else: it may still commit.
    expect(held.calls).toMatchObject({ claim: 1, read: 0 });
    await held.deliver("claim");
    await until(clock, () => a.terms.length === 1, "leads");
    expect(a.outcomes()).toEqual(["transient-error", "refused", "acquired"]);
    expect(a.ticks[1]?.sentence).toBe(
      `a claim of lease timed-out-claim that had timed out won fence ${late} after all; releasing it`,
    );
    expect(a.terms).toHaveLength(1);
    expect(a.terms[0]?.fence).toBeGreaterThan(late);
  });
});

describe("release notices", () => {
  it("a notice makes a follower claim at once; a forged one never yields leadership while the lease is held", async () => {
    const clock = new ManualClock();
    const feed = new PgReleaseFeed({ connection: { connectionString: h.db.url }, table: h.store.table });
    await feed.start();
    h.cleanup(() => feed.close());
    const other = await h.store.claim("noticed", "other", 15_000);
    if (!other.won) throw new Error("setup: the claim failed");
    const held = new HoldingStore(h.store);
    const b = h.elector(clock, { key: "noticed", holder: "b", store: held, releases: feed });
    b.e.start();
    await until(clock, () => b.ticks.length === 1, "first look");
    expect(b.ticks[0]).toMatchObject({ action: "claim", outcome: "held-by-other" });
    // Anyone who can connect can send one: here, nobody released anything. The claim it leads
    // to is conditional on the server, fails, and answers who holds the lease.
    for (let i = 0; i < 3; i++) {
      await h.pool.query("SELECT pg_notify($1, $2)", [h.store.table.channel, "noticed"]);
      await until(clock, () => b.ticks.length === 2 + i, "the forged notice is heard");
      expect(b.ticks[1 + i]).toMatchObject({ action: "claim", outcome: "held-by-other" });
      expect(b.e.isLeader()).toBe(false);
      expect(b.terms).toHaveLength(0);
    }
    expect(await h.store.read("noticed")).toMatchObject({ holder: "other", fence: other.fence });
    expect(held.calls.read).toBe(0);
    expect(clock.now()).toBe(0);

    await h.store.forceRelease("noticed"); // a real release: the claim it leads to wins
    await until(clock, () => b.ticks.length === 5, "the release is heard");
    expect(b.ticks[4]).toMatchObject({ action: "claim", outcome: "acquired" });
    expect(b.e.status().fence).toBeGreaterThan(other.fence);
  });

  it("a feed found dead makes a follower read at once and poll; its reconnection makes it read again", async () => {
    const clock = new ManualClock();
    let reconnections = 0;
    const feed = new PgReleaseFeed({
      connection: { connectionString: h.db.url },
      table: h.store.table,
      reconnectDelayMs: 10,
      onReconnect: () => reconnections++,
    });
    await feed.start();
    h.cleanup(() => feed.close());
    await h.store.claim("reconnect", "other", 15_000);
    const b = h.elector(clock, { key: "reconnect", holder: "b", releases: feed });
    b.e.start();
    await until(clock, () => b.ticks.length === 1, "first look");
    expect(await dropListeners(h.db.url)).toBe(1);
    await until(clock, () => b.ticks.length === 3, "a look when the feed drops, one after the reconnection");
    expect(reconnections).toBe(1);
    expect(b.ticks.slice(1).map((t) => [t.action, t.outcome])).toEqual([
      ["read", "held-by-other"],
      ["read", "held-by-other"],
    ]);
    expect(clock.now()).toBe(0);
  });
});

describe("callers' code that throws", () => {
  it("a lead() that throws is reported as a work error; the term goes on", async () => {
    const clock = new ManualClock();
    const errors: unknown[] = [];
    const a = h.elector(clock, {
      key: "throwing-lead",
      holder: "a",
      lead: () => {
        throw new Error("no such table: jobs");
      },
    });
    a.e.on("work-error", (error) => errors.push(error));
    a.e.start();
    await until(clock, () => errors.length === 1, "the work error");
    expect(String(errors[0])).toBe("Error: no such table: jobs");
    clock.advance(5_000);
    await until(clock, () => a.ticks.length === 2, "renew");
    expect(a.outcomes()).toEqual(["acquired", "renewed"]);
  });

  it("a listener that throws neither stops the loop nor keeps the tick from the other listeners", async () => {
    const clock = new ManualClock();
    const a = h.elector(clock, { key: "throwing-listener", holder: "a" });
    const reported: Array<{ error: unknown; event: string }> = [];
    a.e.on("listener-error", (error, event) => reported.push({ error, event }));
    a.e.prependListener("tick", () => {
      throw new Error("listener bug");
    });
    a.e.start();
    await until(clock, () => a.ticks.length === 1, "acquire");
    clock.advance(5_000);
    await until(clock, () => a.ticks.length === 2, "renew");
    expect(a.outcomes()).toEqual(["acquired", "renewed"]);
    expect(a.transitions.map((t) => t.outcome)).toEqual(["acquired", "renewed"]);
    expect(reported).toEqual([
      { error: new Error("listener bug"), event: "tick" },
      { error: new Error("listener bug"), event: "tick" },
    ]);
    expect(a.e.status()).toMatchObject({ role: "leader", fence: expect.any(Number) });
  });
});
