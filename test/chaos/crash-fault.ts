// leader-crash-reported (--crash-takeover): the leader's sidecar is killed (SIGKILL) and not
// restarted for its back-off (past the lease), as CrashLoopBackOff would keep it down; the kubelet
// stand-in reports the run terminated a moment later (its relist), in the sidecar's
// initContainerStatuses, with the message that run's process left in its own termination message
// file. A follower may take the lease at once then. At the heal the sidecar starts again as a new
// run, reported running with its restart count one higher and the last run's end kept.
import { readFile } from "node:fs/promises";
import { setTimeout as sleep } from "node:timers/promises";
import { sidecarRestarts } from "./app-status.ts";
import type { ChaosCluster } from "./cluster.ts";
import type { Active } from "./db-faults.ts";
import type { InjectedFault } from "./history.ts";
import type { Replica } from "./replica.ts";
import type { PlannedFault } from "./schedule.ts";

type Base = Pick<InjectedFault, "kind" | "target" | "startedAt">;

/** The kubelet notices an exit at its next relist (each second), then writes the status. */
const RELIST_MS = 1_000;

export async function injectCrashReported(
  cluster: ChaosCluster,
  replica: Replica,
  fault: PlannedFault,
  base: Base,
  skipped: (why: string) => Active,
): Promise<Active | null> {
  if (fault.kind !== "leader-crash-reported") return null;
  const kube = cluster.kube;
  if (!kube) throw new Error("crash fault: the cluster is not started");
  // Read before the kill: the killed run's own file (a new run gets another).
  const path = replica.terminationMessagePath;
  if (!replica.killSidecar()) return skipped("sidecar not running");
  const message = await readFile(path, "utf8").catch(() => "");
  const reportedAfterMs = Math.round(Math.random() * RELIST_MS);
  await sleep(reportedAfterMs);
  await kube.reportSidecar(replica.name, () => ({
    running: false,
    ended: { exitCode: 137, reason: "Error", ...(message ? { message } : {}) },
  }));
  const reportedAt = Date.now();
  return {
    ...base,
    detail: `SIGKILL of the sidecar, reported terminated by the kubelet ${reportedAfterMs} ms later${message ? "" : " (no message: the run wrote none)"}, restarted after ${fault.durationMs} ms`,
    heal: async () => {
      replica.startSidecar();
      await kube.reportSidecar(replica.name, (pod) => ({ restartCount: sidecarRestarts(pod) + 1 }));
      return Math.max(reportedAt, Date.now());
    },
  };
}
