// The demo's schedule: wait, stop the leader (graceful SIGTERM and SIGKILL in turn), time the
// failover to a new term, restart the stopped replica so the group stays whole, and repeat.
import { setTimeout as delay } from "node:timers/promises";
import type { FailoverTimer } from "./failover-timer.ts";
import type { ReplicaGroup } from "./replicas.ts";

export type StopKind = "graceful" | "kill";

export const SIGNAL_OF: Record<StopKind, NodeJS.Signals> = { graceful: "SIGTERM", kill: "SIGKILL" };

export interface RoundResult {
  round: number;
  kind: StopKind;
  stopped: string;
  stoppedPid: number;
  oldFence: number;
  newFence: number;
  newLeader: string;
  failoverMs: number;
}

export interface Schedule {
  group: ReplicaGroup;
  timer: FailoverTimer;
  durationMs: number;
  intervalMs: number;
  /** Null: until the signal aborts. */
  rounds: number | null;
  signal: AbortSignal;
  /** One sentence per thing that happened. */
  say(text: string): void;
  /** When the next stop is due (performance.now() time) and which kind, or null while none is. */
  planned(next: { at: number; kind: StopKind } | null): void;
  finished(result: RoundResult): void;
}

export function kindOfRound(round: number): StopKind {
  return round % 2 === 1 ? "graceful" : "kill";
}

export async function runRounds(s: Schedule): Promise<void> {
  // A lease left by an earlier run can take a whole duration to expire.
  const leaderTimeoutMs = 2 * s.durationMs + 10_000;
  const isOurs = (holder: string) => s.group.byHolder(holder) !== undefined;
  const first = await s.timer.waitForLeader(isOurs, leaderTimeoutMs, s.signal);
  s.say(`${s.group.byHolder(first.holder)?.name} leads with fence ${first.fence}`);

  for (let round = 1; s.rounds === null || round <= s.rounds; round++) {
    const kind = kindOfRound(round);
    s.planned({ at: performance.now() + s.intervalMs, kind });
    await delay(s.intervalMs, undefined, { signal: s.signal });
    s.planned(null);

    const current = await s.timer.waitForLeader(isOurs, leaderTimeoutMs, s.signal);
    const leader = s.group.byHolder(current.holder);
    if (!leader) throw new Error(`the lease holder ${current.holder} is not one of the replicas`);
    const signal = SIGNAL_OF[kind];
    s.say(
      `round ${round}: ${signal} to the leader ${leader.name} (pid ${leader.pid}, fence ${current.fence})`,
    );
    const since = await s.timer.serverNow();
    const exit = s.group.stop(leader, signal);
    const term = await s.timer.waitForNewTerm(current.fence, since, leaderTimeoutMs, s.signal);
    const result: RoundResult = {
      round,
      kind,
      stopped: leader.name,
      stoppedPid: leader.pid,
      oldFence: current.fence,
      newFence: term.fence,
      newLeader: s.group.byHolder(term.holder)?.name ?? term.holder,
      failoverMs: term.failoverMs,
    };
    s.finished(result);
    s.say(
      `round ${round}: ${result.newLeader} leads with fence ${term.fence} after ${formatMs(term.failoverMs)} (${kind})`,
    );
    await exit;
    s.signal.throwIfAborted();
    await s.group.restart(leader);
  }
}

export function formatMs(ms: number): string {
  return ms < 10 ? `${ms.toFixed(1)} ms` : `${Math.round(ms)} ms`;
}
