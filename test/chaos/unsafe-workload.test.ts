// The checker catches an unsafe system end to end. The workloads write WITHOUT the fence guard;
// the leader's sidecar has its event loop blocked past the lease while its workload, which keeps
// its last leader reading while the sidecar does not answer, goes on writing with the old fence.
// The other replica takes over and writes with the new one: both terms' rows land interleaved,
// and the checker must report the stale writes, and nothing else.
import { describe, expect, it } from "vitest";
import { runChaos } from "./chaos-run.ts";

describe("chaos run with an unguarded workload", () => {
  it("reports the stale writes as the only violation", async () => {
    const outcome = await runChaos({
      // The first pass of every schedule aims each kind at the leader (planSchedule); the
      // duration may fit a second slot after it.
      seed: "unsafe",
      durationMs: 8_000,
      replicas: 2,
      leaseMs: 2_000,
      retryMs: 200,
      guarded: false,
      kinds: ["loop-block"],
    });
    expect(outcome.schedule[0]?.faults.map((f) => f.target)).toEqual(["leader"]);
    expect(outcome.history.slots[0]?.faults[0]?.target).toMatch(/\(leader\)$/);
    const rules = new Set(outcome.result.violations.map((v) => v.rule));
    expect([...rules]).toEqual(["stale-write"]);
    const [, stale, newer] =
      /write\(s\) by chaos-\d with fence (\d+) accepted after fence (\d+)/.exec(
        outcome.result.violations[0]?.detail ?? "",
      ) ?? [];
    expect(Number(stale)).toBeLessThan(Number(newer));
    expect(outcome.result.writesRejected).toBe(0);
  }, 90_000);
});
