// PostgreSQL failover under the chaos checker, end to end: real sidecars and workloads, a real
// primary with a real streaming standby behind a proxy that moves (failover.ts). The same failover
// with a lagging standby (its link cut, the leader killed, a new claim given time to commit on the
// primary alone) loses an acknowledged claim with asynchronous replication, which the checker must
// see, and loses nothing with synchronous replication, where that claim is never acknowledged.
import { describe, expect, it } from "vitest";
import { type ChaosOptions, runChaos } from "./chaos-run.ts";

const shape: Omit<ChaosOptions, "durationMs" | "kinds"> = {
  seed: "failover",
  replicas: 2,
  leaseMs: 2_000,
  retryMs: 200,
  guarded: true,
  // The database is what is under test; the in-process API server starts in milliseconds.
  apiServer: "in-process",
};

const ASYNC_WARNING = /standby\(s\) replicate asynchronously/;

describe("chaos run with PostgreSQL failover", () => {
  it("asynchronous: the claim the primary acknowledged alone is lost, the checker reports it, and the sidecars warned at start", async () => {
    const outcome = await runChaos({
      ...shape,
      failover: "async",
      kinds: ["pg-failover-lagging"],
      durationMs: 15_000,
    });
    expect(outcome.history.slots).toHaveLength(1);
    const detail = outcome.history.slots[0]?.faults[0]?.detail ?? "";
    const [, claimant, fence] = /(chaos-\d) acquired fence (\d+) on the primary alone/.exec(detail) ?? [];
    expect(claimant, detail).toBeDefined();
    // The new primary never saw that fence: the claimant logged a term the table does not have.
    const lost = outcome.result.violations.filter((v) => v.rule === "fence-not-granted");
    expect(lost.map((v) => v.detail)).toContainEqual(
      expect.stringMatching(new RegExp(`logged fence ${fence},`)),
    );
    expect(outcome.history.leaseRows.some((r) => r.fence === Number(fence))).toBe(false);
    // Every sidecar started against the primary with its asynchronous standby attached.
    const warned = outcome.warnings.find((w) => ASYNC_WARNING.test(w.message));
    expect(warned?.replicas).toEqual(["chaos-0", "chaos-1"]);
  }, 150_000);

  it("synchronous: the same failover and a plain one lose nothing: no violation", async () => {
    const outcome = await runChaos({
      ...shape,
      failover: "sync",
      kinds: ["pg-failover-lagging", "pg-failover"],
      durationMs: 26_000,
    });
    // Both kinds, and maybe one more slot where the duration has room for it.
    const kinds = new Set(outcome.history.slots.map((s) => s.kind));
    expect(kinds).toEqual(new Set(["pg-failover", "pg-failover-lagging"]));
    const lagging = outcome.history.slots.find((s) => s.kind === "pg-failover-lagging");
    // Every commit waits for the standby it was cut from: no claim is acknowledged on the primary alone.
    expect(lagging?.faults[0]?.detail).toMatch(/no claim acknowledged within/);
    expect(outcome.result.violations).toEqual([]);
    expect(outcome.warnings.filter((w) => ASYNC_WARNING.test(w.message))).toEqual([]);
    // Leadership came back after each failover, on the new primary.
    expect(outcome.result.slots.every((s) => s.recoveryMs !== null)).toBe(true);
  }, 150_000);
});
