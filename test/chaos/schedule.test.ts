import { describe, expect, it } from "vitest";
import {
  ABRUPT_ENDS,
  CRASH_FAULT_KINDS,
  FAULT_KINDS,
  healthGraceOf,
  pairable,
  planSchedule,
  type ScheduleShape,
  SESSION_FAULT_KINDS,
  seededRandom,
} from "./schedule.ts";

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

  it("never pairs two faults of the shared database, nor an abrupt end with a held-back renew", () => {
    expect(pairable("row-lock", "commit-stall")).toBe(false);
    expect(pairable("row-delete", "db-delay")).toBe(false);
    expect(pairable("db-cut", "clock-step")).toBe(false);
    expect(pairable("row-delete", "sigkill")).toBe(true);
    for (const seed of ["1", "2", "3"]) {
      for (const slot of planSchedule({ ...shape, seed, durationMs: 1_800_000 })) {
        const [first, second] = slot.faults;
        if (first && second) expect(pairable(first.kind, second.kind)).toBe(true);
      }
    }
    expect([...ABRUPT_ENDS].sort()).toEqual(["clock-step", "row-delete", "table-drop"]);
  });

  it("plans at least 300 faults for 30 minutes, a third of the slots or so in pairs", () => {
    const slots = planSchedule({ ...shape, durationMs: 1_800_000 });
    const faults = slots.reduce((n, slot) => n + slot.faults.length, 0);
    expect(faults).toBeGreaterThanOrEqual(300);
    const pairs = slots.filter((slot) => slot.kind === "two-at-once").length;
    expect(pairs / slots.length).toBeGreaterThan(0.2);
    expect(pairs / slots.length).toBeLessThan(0.4);
  });

  it("steps the server clock both ways, beyond the safety margin and within it", () => {
    const steps = planSchedule({ ...shape, durationMs: 1_800_000, kinds: ["clock-step"] }).map(
      (slot) => slot.faults[0]?.stepMs ?? 0,
    );
    expect(steps.some((ms) => ms >= 2_000)).toBe(true);
    expect(steps.some((ms) => ms <= -2_000)).toBe(true);
    expect(steps.some((ms) => ms > 0 && ms < shape.renewMs)).toBe(true);
    expect(steps.some((ms) => ms < 0 && ms > -shape.renewMs)).toBe(true);
  });

  it("keeps an application unready past the health grace, and never with an API fault", () => {
    const grace = healthGraceOf(shape.leaseMs);
    const durations = planSchedule({ ...shape, durationMs: 600_000, kinds: ["app-unready"] }).map(
      (slot) => slot.faults[0]?.durationMs ?? 0,
    );
    expect(Math.min(...durations)).toBeGreaterThan(grace);
    expect(Math.max(...durations)).toBeLessThanOrEqual(grace * 3);
    for (const api of ["api-500", "api-hang", "api-unreachable"] as const) {
      expect(pairable("app-unready", api)).toBe(false);
      expect(pairable(api, "app-unready")).toBe(false);
    }
    expect(pairable("app-unready", "sigkill")).toBe(true);
  });

  it("under --session-takeover kills the leader's session often, in each variant, pausing only the paused one", () => {
    const slots = planSchedule({
      ...shape,
      durationMs: 300_000,
      kinds: [...FAULT_KINDS, ...SESSION_FAULT_KINDS],
    });
    const kills = slots.flatMap((s) => s.faults).filter((f) => f.kind === "leader-session-kill");
    expect(kills.length).toBeGreaterThanOrEqual(5);
    expect(new Set(kills.map((f) => f.sessionKill))).toEqual(new Set(["plain", "paused", "renew-queued"]));
    for (const f of kills) {
      if (f.sessionKill === "paused") expect(f.durationMs).toBeGreaterThanOrEqual(200);
      else expect(f.durationMs).toBe(0);
    }
    // The stall: past the feed's ping timeout (2 s), often past its interval (the lease) too.
    const stalls = slots.flatMap((s) => s.faults).filter((f) => f.kind === "leader-session-stall");
    expect(stalls.length).toBeGreaterThanOrEqual(5);
    for (const f of stalls) expect(f.durationMs).toBeGreaterThanOrEqual(2_000);
    expect(stalls.some((f) => f.durationMs > shape.leaseMs + 2_000)).toBe(true);
  });

  it("under --crash-takeover crashes the leader's sidecar often, kept down past the lease", () => {
    const slots = planSchedule({
      ...shape,
      durationMs: 300_000,
      kinds: [...FAULT_KINDS, ...CRASH_FAULT_KINDS],
    });
    const crashes = slots.flatMap((s) => s.faults).filter((f) => f.kind === "leader-crash-reported");
    expect(crashes.length).toBeGreaterThanOrEqual(5);
    for (const f of crashes) expect(f.durationMs).toBeGreaterThan(shape.leaseMs);
    // Without the option the schedules are what they were: no crash kind, no draw of its own.
    const plain = planSchedule({ ...shape, durationMs: 300_000, kinds: FAULT_KINDS });
    expect(plain.flatMap((s) => s.faults).some((f) => f.kind === "leader-crash-reported")).toBe(false);
  });

  it("refuses an empty list of kinds", () => {
    expect(() => planSchedule({ ...shape, kinds: [] })).toThrow(/at least one fault kind/);
  });
});
