// A container restarted in place: the leader is SIGKILLed and its pod's process started again at
// once (as the kubelet does, without its back-off), and the trial times the new term against the
// restarted process's own start-up, so what the handover adds to a restart shows apart from it.
import { setTimeout as delay } from "node:timers/promises";
import type { Candidate, LogLine } from "./candidates.ts";
import type { Lane } from "./lane.ts";
import { pgleaseRenewMs } from "./systems.ts";

export interface RestartTrialResult {
  lane: string;
  /** SIGKILL → a new term (pglease: its acquired_at; client-go: its acquired line; advisory: the lock's take). */
  holdsMs: number;
  /** The restarted process: spawn → its line saying it started (pglease: "campaigning"). */
  startMs: number;
  /** holdsMs − startMs: what the handover adds to the process start (the kill → spawn gap included). */
  overStartMs: number;
  /** The new term is the restarted process's, not a follower's. */
  restartedLeads: boolean;
}

/** The new leader: who, and when on the clock the system's own records give. */
async function newLeader(
  lane: Lane,
  start: { serverText: string; serverMs: number; wallAt: number; oldFence: number },
): Promise<{ holdsMs: number; leader: (c: Candidate, started: LogLine) => boolean }> {
  const { timer } = lane;
  if (timer) {
    const term = await timer.waitForNewTerm(start.oldFence, start.serverText, lane.timeoutMs, lane.signal);
    // The start line carries the holder with its restart proof; a warning before it may not.
    return { holdsMs: term.failoverMs, leader: (_, started) => started.fields.holder === term.holder };
  }
  const taken: LogLine = await lane.firstAcquired(start.wallAt, () => true);
  const holdsMs =
    lane.system.kind === "advisory-lock"
      ? Number(taken.fields.serverAtMs) - start.serverMs
      : Number(taken.fields.at) - start.wallAt;
  return { holdsMs, leader: (c) => c.lines.includes(taken) };
}

export async function restartTrial(lane: Lane): Promise<RestartTrialResult> {
  const leader = await lane.settle();
  // A uniformly random moment within the renew cycle, as for the crashes without restart.
  await delay(Math.random() * pgleaseRenewMs(lane.timing), undefined, { signal: lane.signal });
  const oldFence = lane.timer ? ((await lane.timer.read())?.fence ?? 0) : 0;
  const server = lane.system.kind === "client-go" ? null : await lane.serverClock();
  const wallAt = Date.now();
  await leader.kill("SIGKILL");
  const restarted = lane.restart(leader);
  const [started, taken] = await Promise.all([
    restarted.waitFor((l) => l.event === "started", lane.timeoutMs, lane.signal),
    newLeader(lane, { serverText: server?.text ?? "", serverMs: server?.ms ?? 0, wallAt, oldFence }),
  ]);
  const startMs = started.receivedAt - restarted.spawnedAt;
  return {
    lane: lane.name,
    holdsMs: taken.holdsMs,
    startMs,
    overStartMs: taken.holdsMs - startMs,
    restartedLeads: taken.leader(restarted, started),
  };
}
