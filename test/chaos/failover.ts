// The PostgreSQL failover faults (`--failover sync|async`): the database is a primary with a
// streaming standby behind a proxy that moves to the new primary (test/support/postgres/failover-pair.ts).
//
// - pg-failover: the primary stops like a crash; after the seeded downtime (failure detection) the
//   standby is promoted, the proxy moves, and a new standby is built from the new primary.
// - pg-failover-lagging: the same, but first the standby's replication link is cut and the leader
//   killed, and the failover waits until another replica's claim has committed on the primary (so
//   on the primary alone), at most twice the lease. Asynchronous replication acknowledges that
//   claim and the failover loses it; synchronous replication never acknowledges it.
import { setTimeout as sleep } from "node:timers/promises";
import type { FailoverPair, FailoverSteps } from "../support/postgres/failover-pair.ts";
import type { ChaosCluster } from "./cluster.ts";
import type { Replica } from "./replica.ts";
import type { PlannedFault } from "./schedule.ts";

export interface FailoverFault {
  /** Filled in as the failover goes; read once it healed. */
  detail: string;
  target: string | null;
  heal(): Promise<number>;
}

// Polling the recorder, which collects the replicas' log lines as they come.
const POLL_MS = 20;

/** The first claim any live replica logs at or after `since`, within `boundMs`. */
async function claimSince(
  cluster: ChaosCluster,
  since: number,
  boundMs: number,
): Promise<{ replica: string; fence: number | null } | null> {
  const { recorder } = cluster;
  for (const deadline = Date.now() + boundMs; Date.now() < deadline; ) {
    const claim = recorder.transitions.find((t) => t.outcome === "acquired" && t.time >= since);
    if (claim) {
      const replica = recorder.incarnations.find((i) => i.pid === claim.pid)?.replica ?? `pid ${claim.pid}`;
      return { replica, fence: claim.fence };
    }
    await sleep(POLL_MS);
  }
  return null;
}

function describe(steps: FailoverSteps): string {
  return (
    `standby promoted ${steps.promotedAt - steps.stoppedAt} ms after the primary stopped, ` +
    `a new standby streaming ${steps.standbyAt - steps.movedAt} ms after the proxy moved`
  );
}

function pairOf(cluster: ChaosCluster): FailoverPair {
  if (!cluster.failover)
    throw new Error("pg-failover needs a primary with a standby: run with --failover sync|async");
  return cluster.failover;
}

/** Starts the failover; heal() resolves once a new standby streams from the new primary. */
export function startFailover(cluster: ChaosCluster, fault: PlannedFault, leader: Replica): FailoverFault {
  const pair = pairOf(cluster);
  if (fault.kind === "pg-failover") {
    const failing = pair.failover({ downMs: fault.durationMs });
    const active: FailoverFault = {
      detail: `primary crashed, down ${fault.durationMs} ms`,
      target: null,
      heal: async () => {
        active.detail = `${active.detail}; ${describe(await failing)}`;
        return Date.now();
      },
    };
    return active;
  }
  const active: FailoverFault = {
    detail: "",
    target: `${leader.name} (leader)`,
    heal: async () => Date.now(),
  };
  const failing = laggingFailover(cluster, pair, fault, leader, active);
  active.heal = async () => {
    await failing;
    return Date.now();
  };
  return active;
}

async function laggingFailover(
  cluster: ChaosCluster,
  pair: FailoverPair,
  fault: PlannedFault,
  leader: Replica,
  active: FailoverFault,
): Promise<void> {
  pair.standbyLink.cut();
  const cutAt = Date.now();
  const killed = leader.killSidecar();
  const boundMs = 2 * cluster.settings.leaseMs;
  const claim = await claimSince(cluster, cutAt, boundMs);
  const steps = await pair.failover({ downMs: fault.durationMs });
  if (killed) leader.startSidecar();
  const claimed = claim
    ? `${claim.replica} acquired fence ${claim.fence} on the primary alone`
    : `no claim acknowledged within ${boundMs} ms`;
  active.detail =
    `standby cut off, ${leader.name} killed, ${claimed}; primary crashed, down ${fault.durationMs} ms; ` +
    `${describe(steps)}`;
}
