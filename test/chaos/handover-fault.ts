// The handover faults: at a random moment, the leader is asked (as `pglease handover` asks) to
// hand over to a follower; in the second kind that follower is SIGKILLed as soon as the
// reservation is written, so the lease waits for a target that never claims until the
// reservation passes. Neither may ever make two leaders, or a lease that stays without one.
import { handOver } from "../../src/candidacy/plan.ts";
import { CandidateStore } from "../../src/postgres/candidates.ts";
import { HandoverStore } from "../../src/postgres/handover.ts";
import { leaseTable } from "../../src/postgres/table.ts";
import type { ChaosCluster } from "./cluster.ts";
import type { Active } from "./db-faults.ts";
import type { InjectedFault } from "./history.ts";
import type { PlannedFault } from "./schedule.ts";

export async function injectHandover(
  cluster: ChaosCluster,
  fault: PlannedFault,
  base: Pick<InjectedFault, "kind" | "target" | "startedAt">,
  skipped: (why: string) => Active,
): Promise<Active | null> {
  if (fault.kind !== "handover" && fault.kind !== "handover-target-dies") return null;
  const admin = cluster.admin;
  if (!admin) throw new Error("faults: the cluster is not started");
  const leader = cluster.recorder.believedLeader();
  const followers = cluster.podNames().filter((name) => name !== leader);
  const to = followers[fault.fallback % Math.max(1, followers.length)];
  if (!leader || !to) return skipped("no leader, or nobody to hand over to");
  const table = leaseTable();
  const stores = {
    handovers: new HandoverStore(admin, table, 5_000),
    candidates: new CandidateStore(admin, table, 5_000),
  };
  const reservationMs = cluster.settings.leaseMs;
  try {
    await handOver(stores, cluster.settings.lease, { to, reservationMs, wait: false });
  } catch (error) {
    return skipped(`handover refused: ${(error as Error).message}`);
  }
  if (fault.kind === "handover") {
    return {
      ...base,
      detail: `handover to ${to} asked (reservation ${reservationMs} ms)`,
      heal: async () => Date.now(),
    };
  }
  const target = cluster.replica(to);
  if (!target.killSidecar()) return skipped(`handover to ${to} asked, but its sidecar was not running`);
  return {
    ...base,
    detail: `handover to ${to} asked (reservation ${reservationMs} ms), ${to} SIGKILLed at once, restarted after ${fault.durationMs} ms`,
    heal: async () => {
      target.startSidecar();
      return Date.now();
    },
  };
}
