// Answers that come too late, and a database server whose clock steps. Real PostgreSQL answers
// every call; the test decides only when an answer reaches the elector (HoldingStore) and how
// far the elector's clock has moved meanwhile (a stall: time passes, no timer fires).
import { describe, expect, it } from "vitest";
import type { ClockStepReport, LeaderSeen } from "../../src/election/elector.ts";
import { PgLeaseStore } from "../../src/postgres/store.ts";
import { electorHarness, settle, until } from "../support/election/elector-harness.ts";
import { HoldingStore } from "../support/election/holding-store.ts";
import { ManualClock } from "../support/manual-clock.ts";
import { installServerClock } from "../support/postgres/server-clock.ts";

const h = electorHarness();

describe("no answer received after the local deadline counts", () => {
  it("a claim answered after the deadline it would set starts no work, publishes nothing, and is released", async () => {
    const clock = new ManualClock();
    const held = new HoldingStore(h.store);
    held.hold("claim");
    const a = h.elector(clock, { key: "late-claim", holder: "a", store: held });
    h.cleanup(() => held.deliverAll());
    const seen: LeaderSeen[] = [];
    a.e.on("leader-changed", (s) => seen.push(s));
    a.e.start();
    await until(clock, () => held.held("claim") === 1, "the claim goes out");
    await held.answered("claim"); // committed on the server: a new fence for 15 s
    // The loop is blocked past the deadline the claim would set (sent at 0 + 15 s − 5 s margin)
    // while the answer waits on the socket; it is read before any overdue timer runs.
    clock.stall(10_000);
    held.pass("claim");
    await held.deliver("claim");
    await settle(() => a.ticks.length === 1, "the late answer is handled");
    // Nobody else claims the key: the row keeps the fence the late claim won.
    const won = await h.store.read("late-claim");
    expect(won).toMatchObject({ holder: "a" });

    expect(a.ticks[0]).toMatchObject({ action: "claim", outcome: "refused" });
    expect(a.ticks[0]?.sentence).toBe(
      `won lease late-claim with fence ${won?.fence} but the answer came 0.0s after the local deadline it would set; releasing it`,
    );
    expect(a.terms).toEqual([]);
    expect(a.e.status()).toMatchObject({ role: "follower", fence: null, leader: null });
    expect(seen.some((s) => s.holder === "a")).toBe(false);
    await settle(() => held.answers.release === 1, "the refused term is released");
    expect((await h.store.read("late-claim"))?.ttlMs).toBeLessThanOrEqual(0);
  });

  it("a renew answered after the local deadline extends nothing: the leader steps down", async () => {
    const clock = new ManualClock();
    const held = new HoldingStore(h.store);
    const a = h.elector(clock, { key: "late-renew", holder: "a", store: held });
    h.cleanup(() => held.deliverAll());
    a.e.start();
    await until(clock, () => a.ticks.length === 1, "acquire");
    const fence = a.terms[0]?.fence;
    held.hold("renew");
    clock.advance(5_000);
    await until(clock, () => held.held("renew") === 1, "the renew goes out");
    await held.answered("renew"); // the server extended the lease
    clock.stall(5_000); // now exactly at the deadline of 10 s; neither the deadline nor the call timer ran
    await held.deliver("renew");
    await settle(() => a.ticks.length === 2, "the late answer is handled");

    expect(a.ticks[1]).toMatchObject({ action: "renew", outcome: "stepped-down" });
    expect(a.ticks[1]?.sentence).toBe(
      `stepped down from lease late-renew (fence ${fence}): the renew was answered only after the local deadline`,
    );
    expect(a.e.isLeader()).toBe(false);
    expect(a.terms[0]?.signal.aborted).toBe(true);
    clock.advance(0); // the overdue timers run now: nothing more happens
    expect(a.outcomes()).toEqual(["acquired", "stepped-down"]);
  });

  it("a renew that succeeds after the deadline fired is ignored, and the next term gets a higher fence", async () => {
    const clock = new ManualClock();
    const held = new HoldingStore(h.store);
    const a = h.elector(clock, { key: "renew-after-deadline", holder: "a", store: held });
    h.cleanup(() => held.deliverAll());
    a.e.start();
    await until(clock, () => a.ticks.length === 1, "acquire");
    held.hold("renew");
    clock.advance(5_000); // renew sent, held
    clock.advance(a.e.timing.callTimeoutMs); // it times out: retry after transientRetryMs
    await until(clock, () => a.ticks.length === 2, "the renew times out");
    clock.advance(a.e.timing.transientRetryMs);
    await until(clock, () => held.held("renew") === 2, "the retry goes out");
    clock.advance(10_000 - clock.now()); // the deadline fires while the retry is in flight
    expect(a.outcomes()).toEqual(["acquired", "transient-error", "stepped-down"]);
    await held.deliver("renew");
    await held.deliver("renew");
    await settle(() => held.answers.renew === 2, "both renews answered");
    expect(a.outcomes()).toEqual(["acquired", "transient-error", "stepped-down"]);
    expect(a.e.status()).toMatchObject({ role: "follower", fence: null });

    // Its renews kept the row alive in its name; claiming it again must still give a new fence.
    held.pass("renew");
    for (let i = 0; i < 20 && a.terms.length < 2; i++) {
      clock.advance(500);
      await until(clock, () => held.quiet(), "calls answered or held");
    }
    expect(a.terms).toHaveLength(2);
    expect(a.terms[1]?.fence).toBeGreaterThan(a.terms[0]?.fence ?? Number.NaN);
  });
});

describe("steps of the database server's clock", () => {
  it("a forward step beyond the margin is reported and ends leadership at once", async () => {
    const shifted = await installServerClock(h.db.url);
    h.cleanup(() => shifted.end());
    h.cleanup(() => shifted.shift(0));
    const store = new PgLeaseStore({ pool: shifted.pool, statementTimeoutMs: 30_000 });
    const clock = new ManualClock();
    const a = h.elector(clock, { key: "clock-forward", holder: "a", store });
    const steps: ClockStepReport[] = [];
    a.e.on("clock-step", (s) => steps.push(s));
    a.e.start();
    await until(clock, () => a.ticks.length === 1, "acquire");
    const fence = a.terms[0]?.fence;
    // 5 s pass here, 11 s on the server: it gained 6 s, more than the 5 s margin.
    await shifted.shift(11_000);
    clock.advance(5_000);
    await until(clock, () => a.ticks.length === 2, "renew");

    expect(steps).toHaveLength(1);
    expect(steps[0]).toMatchObject({ key: "clock-forward", direction: "forward" });
    expect(steps[0]?.sizeMs).toBeGreaterThanOrEqual(6_000);
    expect(steps[0]?.sentence).toMatch(
      /^the database server's clock jumped forward by at least 6\.\ds against this process's clock \(lease clock-forward\): leases ran out sooner than computed$/,
    );
    expect(a.ticks[1]).toMatchObject({ action: "renew", outcome: "stepped-down" });
    expect(a.ticks[1]?.sentence).toMatch(
      new RegExp(
        `^stepped down from lease clock-forward \\(fence ${fence}\\): the database server's clock jumped forward by at least 6\\.\\ds, more than the safety margin$`,
      ),
    );
    expect(a.e.isLeader()).toBe(false);
    expect(a.terms[0]?.signal.aborted).toBe(true);
  });

  it("a backward step is reported and leaves a healthy term alone", async () => {
    const shifted = await installServerClock(h.db.url);
    h.cleanup(() => shifted.end());
    h.cleanup(() => shifted.shift(0));
    const store = new PgLeaseStore({ pool: shifted.pool, statementTimeoutMs: 30_000 });
    const clock = new ManualClock();
    const a = h.elector(clock, { key: "clock-back", holder: "a", store });
    const steps: ClockStepReport[] = [];
    a.e.on("clock-step", (s) => steps.push(s));
    a.e.start();
    await until(clock, () => a.ticks.length === 1, "acquire");
    const { fence, expiresAt } = a.e.status();
    await shifted.shift(-7_000);
    clock.advance(5_000);
    await until(clock, () => a.ticks.length === 2, "renew");

    expect(steps).toHaveLength(1);
    expect(steps[0]).toMatchObject({ key: "clock-back", direction: "backward" });
    // 5 s here, −7 s there: 12 s, less the little real time the round trips took.
    expect(steps[0]?.sizeMs).toBeGreaterThan(11_000);
    expect(a.ticks[1]).toMatchObject({ action: "renew", outcome: "renewed" });
    // The expiry only grows: the renew keeps the claim's, 15 s after the claim on a server clock
    // that now reads 7 s earlier, so 22 s are left less the margin, less the round trips' real time.
    expect(a.e.status()).toMatchObject({ role: "leader", fence, expiresAt });
    expect(a.e.status().deadlineInMs).toBeGreaterThan(16_000);
    expect(a.e.status().deadlineInMs).toBeLessThanOrEqual(17_000);
    expect(a.terms[0]?.signal.aborted).toBe(false);
  });
});
