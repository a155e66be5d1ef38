// The two clocks compared from the send of the last claim or renew: plain numbers, no database.
import { describe, expect, it } from "vitest";
import { everySuspensionCheck, SUSPENSION_CHECK_MS, SuspensionWatch } from "../../src/election/suspension.ts";
import { ManualClock } from "../support/manual-clock.ts";

describe("suspension watch", () => {
  it("measures the wall clock's lead from the mark, however many checks came since", () => {
    const clock = new ManualClock();
    const watch = new SuspensionWatch(clock, 5_000);
    expect(watch.gap()).toBeNull(); // nothing marked yet
    watch.mark(watch.reading());
    clock.advance(3_000);
    expect(watch.gap()).toBeNull(); // both moved together
    clock.stepWall(3_000);
    expect(watch.gap()).toBeNull(); // within the margin
    clock.advance(1_000);
    clock.stepWall(2_001);
    expect(watch.gap()).toBe(5_001); // two short suspensions add up
    expect(watch.gap()).toBe(5_001); // checking takes nothing away
    watch.mark(watch.reading()); // a renew succeeded: its deadline counts from here
    expect(watch.gap()).toBeNull();
  });

  it("forgets a step back at once, so it ends nothing and hides no later suspension", () => {
    const clock = new ManualClock();
    const watch = new SuspensionWatch(clock, 5_000);
    watch.mark(watch.reading());
    clock.stepWall(-3_600_000);
    expect(watch.gap()).toBeNull();
    clock.advance(1_000);
    clock.stepWall(6_000);
    expect(watch.gap()).toBe(6_000);
  });

  it("a clock without a wall clock is never checked", () => {
    const watch = new SuspensionWatch({ now: () => 0, setTimer: () => ({ cancel() {} }) }, 1);
    watch.mark(watch.reading());
    expect(watch.gap()).toBeNull();
  });

  it("every check of one clock runs on one timer, armed while any check is registered", () => {
    const clock = new ManualClock();
    const runs = [0, 0, 0];
    const checks = runs.map((_, i) =>
      everySuspensionCheck(clock, () => {
        runs[i] = (runs[i] ?? 0) + 1;
      }),
    );
    expect(clock.pendingTimers()).toBe(1);
    clock.advance(SUSPENSION_CHECK_MS);
    expect(runs).toEqual([1, 1, 1]);
    expect(clock.pendingTimers()).toBe(1);
    checks[0]?.cancel();
    clock.advance(SUSPENSION_CHECK_MS);
    expect(runs).toEqual([1, 2, 2]);
    checks[1]?.cancel();
    checks[2]?.cancel();
    expect(clock.pendingTimers()).toBe(0);
    // Another clock (a test's own) gets its own timer; one without a wall clock gets none.
    everySuspensionCheck(new ManualClock(), () => {});
    expect(clock.pendingTimers()).toBe(0);
    let armed = 0;
    const setTimer = () => {
      armed++;
      return { cancel() {} };
    };
    everySuspensionCheck({ now: () => 0, setTimer }, () => {});
    expect(armed).toBe(0);
  });

  it("a check that ends another's registration while they run keeps that one from running", () => {
    const clock = new ManualClock();
    let second = 0;
    const first = everySuspensionCheck(clock, () => later.cancel());
    const later = everySuspensionCheck(clock, () => second++);
    clock.advance(SUSPENSION_CHECK_MS);
    expect(second).toBe(0);
    first.cancel();
    expect(clock.pendingTimers()).toBe(0);
  });
});
