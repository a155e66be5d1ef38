// A suspended host: the monotonic clock stands still while a VM or laptop sleeps, the wall clock
// does not. Real PostgreSQL answers every call; the test's clock moves the wall clock alone
// (ManualClock.stepWall), as a resume after a suspension shows it, and fires what falls due.
import { describe, expect, it } from "vitest";
import { createLeasePool } from "../../src/postgres/pool.ts";
import { PgLeaseStore } from "../../src/postgres/store.ts";
import type { Timer } from "../../src/shared/clock.ts";
import { electorHarness, until } from "../support/election/elector-harness.ts";
import { HoldingStore } from "../support/election/holding-store.ts";
import { ManualClock } from "../support/manual-clock.ts";

const h = electorHarness();

describe("a suspended host", () => {
  it("a leader that resumes after sleeping past its term stops believing at once and steps down within a second", async () => {
    const clock = new ManualClock();
    const a = h.elector(clock, { key: "suspended", holder: "a" });
    a.e.start();
    await until(clock, () => a.ticks.length === 1, "acquire");
    const fence = a.terms[0]?.fence;
    clock.advance(1_000);
    expect(a.e.isLeader()).toBe(true);

    // The host slept 40 s (the term is long over on the server); the monotonic clock says 0 s.
    clock.stepWall(40_000);
    expect(a.e.isLeader()).toBe(false);
    clock.advance(1_000);
    await until(clock, () => a.ticks.length === 2, "the step-down");
    expect(a.ticks[1]).toMatchObject({ action: "deadline", outcome: "stepped-down" });
    expect(a.ticks[1]?.sentence).toBe(
      `stepped down from lease suspended (fence ${fence}): the wall clock moved 40.0s more than the monotonic clock (the host was suspended, or its clock stepped forward), more than the safety margin`,
    );
    // No renew went out for the term: it ended on the elector's own clocks.
    expect(a.ticks.map((t) => t.action)).toEqual(["claim", "deadline"]);
  });

  it("a tick that finds the host suspended steps down instead of renewing", async () => {
    const clock = new ManualClock();
    const a = h.elector(clock, { key: "suspended-tick", holder: "a" });
    a.e.start();
    await until(clock, () => a.ticks.length === 1, "acquire");
    // Suspended just before the renew tick: the renew tick is the first timer to run on resume.
    clock.advance(4_999);
    clock.stepWall(30_000);
    clock.advance(1);
    await until(clock, () => a.ticks.length >= 2, "the tick after resume");
    expect(a.ticks[1]).toMatchObject({ outcome: "stepped-down" });
    expect(a.ticks[1]?.sentence).toMatch(/the wall clock moved 30\.0s more than the monotonic clock/);
  });

  it("a suspension while a renew is out counts from that renew's send: its answer extends nothing", async () => {
    const clock = new ManualClock();
    const held = new HoldingStore(h.store);
    const a = h.elector(clock, { key: "suspended-renew", holder: "a", store: held });
    h.cleanup(() => held.deliverAll());
    a.e.start();
    await until(clock, () => a.ticks.length === 1, "acquire");
    held.hold("renew");
    clock.advance(5_000);
    await until(clock, () => held.held("renew") === 1, "the renew goes out");
    // The host sleeps 20 s with the renew out; its answer (a success) is read on resume.
    clock.stepWall(20_000);
    await held.deliver("renew");
    await until(clock, () => a.ticks.length === 2, "the renew's answer");
    expect(a.outcomes()).toEqual(["acquired", "renewed"]);
    expect(a.e.isLeader()).toBe(false);
    clock.advance(1_000);
    await until(clock, () => a.ticks.length === 3, "the step-down");
    expect(a.ticks[2]).toMatchObject({ action: "deadline", outcome: "stepped-down" });
  });

  it("an NTP step back ends nothing and wedges nothing; a step forward beyond the margin costs a handover", async () => {
    const clock = new ManualClock();
    const a = h.elector(clock, { key: "wall-steps", holder: "a" });
    a.e.start();
    await until(clock, () => a.ticks.length === 1, "acquire");
    clock.stepWall(-60_000);
    for (let renews = 1; renews <= 3; renews++) {
      clock.advance(5_000);
      await until(clock, () => a.ticks.length === 1 + renews, `renew ${renews}`);
    }
    expect(a.outcomes()).toEqual(["acquired", "renewed", "renewed", "renewed"]);
    expect(a.e.isLeader()).toBe(true);

    // Within the margin (5 s): slewing and small steps are absorbed.
    clock.stepWall(4_000);
    clock.advance(5_000);
    await until(clock, () => a.ticks.length === 5, "renew 4");
    expect(a.outcomes().at(-1)).toBe("renewed");
    // Beyond it: indistinguishable from a suspension, so the term ends (safe, but a handover).
    clock.stepWall(6_000);
    clock.advance(1_000);
    await until(clock, () => a.ticks.length === 6, "the step-down");
    expect(a.outcomes().at(-1)).toBe("stepped-down");
    // And it campaigns again as usual: the lease is its own once more, with a new fence.
    clock.advance(2_000);
    await until(clock, () => a.terms.length === 2, "a new term");
    expect(a.terms[1]?.fence).toBeGreaterThan(a.terms[0]?.fence ?? Number.NaN);
  });

  it("many leaders of one process share one suspension-check timer, and each still steps down on resume", async () => {
    // Counts the timers armed for the one-second check (no renew, deadline or retry is a second away).
    class CountingClock extends ManualClock {
      checkTimers = 0;
      override setTimer(delayMs: number, fire: () => void): Timer {
        if (delayMs === 1_000) this.checkTimers++;
        return super.setTimer(delayMs, fire);
      }
    }
    const clock = new CountingClock();
    // Each leader's claim gets an open connection of its own: on the harness's pool of four, a
    // claim that waited 500 ms (real time) behind the others is dropped unsent, as the store is
    // meant to do, and at load 26 one of the twenty did not lead.
    const pool = createLeasePool({ connectionString: h.db.url, max: 20 });
    h.cleanup(() => pool.end());
    const opened = await Promise.all(Array.from({ length: 20 }, () => pool.connect()));
    for (const client of opened) client.release();
    const store = new PgLeaseStore({ pool, statementTimeoutMs: 30_000 });
    const leaders = Array.from({ length: 20 }, (_, i) =>
      h.elector(clock, { key: `shared-check-${i}`, holder: "a", store }),
    );
    for (const l of leaders) l.e.start();
    await until(clock, () => leaders.every((l) => l.ticks.length === 1), "every lease acquired");
    expect(leaders.every((l) => l.e.isLeader())).toBe(true);

    // Three seconds of leading: one check timer a second for the whole process, not one per lease.
    const armedBefore = clock.checkTimers;
    for (let second = 1; second <= 3; second++) clock.advance(1_000);
    expect(clock.checkTimers - armedBefore).toBe(3);
    expect(leaders.every((l) => l.e.isLeader())).toBe(true);

    // The host slept 40 s: the next check steps every one of them down, before any renew is due.
    clock.stepWall(40_000);
    clock.advance(1_000);
    await until(clock, () => leaders.every((l) => l.ticks.length === 2), "every step-down");
    for (const l of leaders) {
      expect(l.ticks[1]).toMatchObject({ action: "deadline", outcome: "stepped-down" });
      expect(l.ticks[1]?.sentence).toMatch(/the wall clock moved 40\.0s more than the monotonic clock/);
    }
  });
});
