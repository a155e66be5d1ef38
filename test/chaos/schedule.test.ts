import { describe, expect, it } from "vitest";
import { FAULT_KINDS, planSchedule, type ScheduleShape, seededRandom } from "./schedule.ts";

const shape: ScheduleShape = {
  seed: "1",
  durationMs: 90_000,
  replicas: 3,
  leaseMs: 2_000,
  renewMs: 666,
  blockMs: 3_000,
};

describe("chaos fault schedule", () => {
  it("is the same for the same seed and differs for another", () => {
    expect(planSchedule(shape)).toEqual(planSchedule({ ...shape }));
    expect(planSchedule({ ...shape, seed: "2" })).not.toEqual(planSchedule(shape));
    const a = seededRandom("x");
    const b = seededRandom("x");
    expect([a(), a(), a()]).toEqual([b(), b(), b()]);
  });

  it("plans every kind at the leader first in the CI run (seed 1, 90 s), within the duration at the quickest", () => {
    const slots = planSchedule(shape);
    expect(new Set(slots.map((s) => s.kind))).toEqual(new Set(FAULT_KINDS));
    const first = slots.slice(0, FAULT_KINDS.length);
    expect(first.map((s) => s.faults[0]?.target)).toEqual(FAULT_KINDS.map(() => "leader"));
    const last = slots.at(-1);
    expect((last?.startMs ?? 0) + (last?.healMs ?? 0) + (last?.minSettleMs ?? 0)).toBeLessThanOrEqual(90_000);
  });

  it("overlaps the two faults of a pair, and keeps pauses longer than the lease", () => {
    for (const seed of ["1", "2", "3", "4", "5"]) {
      for (const slot of planSchedule({ ...shape, seed, durationMs: 600_000 })) {
        if (slot.kind === "two-at-once") {
          const [first, second] = slot.faults;
          expect(slot.faults).toHaveLength(2);
          expect(second?.kind).not.toBe(first?.kind);
          expect(second?.delayMs ?? Number.POSITIVE_INFINITY).toBeLessThan(first?.durationMs ?? 0);
        }
        for (const fault of slot.faults) {
          if (fault.kind === "sigstop" || fault.kind === "loop-block") {
            expect(fault.durationMs).toBeGreaterThan(shape.leaseMs);
          }
          if (fault.kind === "db-delay") expect(fault.latencyMs).toBeGreaterThan(shape.renewMs);
        }
      }
    }
  });

  it("refuses an empty list of kinds", () => {
    expect(() => planSchedule({ ...shape, kinds: [] })).toThrow(/at least one fault kind/);
  });
});
