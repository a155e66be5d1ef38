// Where a graceful handover's time goes, on the database side, in one process: a leader's close()
// (stop → release statement → its NOTIFY) and a follower on a healthy feed (notice → wake → claim
// → acquired). Each pod is its own openLeases (own pool, own LISTEN connection); the steps are
// timed where the store is called. The Kubernetes side (the new leader's peer demotion list and
// its patches) is the peers group's "labelled" figure minus its "held" one.
import { setTimeout as delay } from "node:timers/promises";
import type { Elector } from "../../src/election/elector.ts";
import { type Leases, openLeases } from "../../src/leases/open-leases.ts";
import type { BenchContext, Table } from "../group.ts";
import { type LatencyStats, latencyStats } from "../measure.ts";
import { ms } from "../report.ts";

const TABLE = "bench_handover";
const KEY = "handover";

interface Call {
  kind: string;
  sentAt: number;
  answeredAt: number;
}

interface Pod {
  leases: Leases;
  elector: Elector;
  calls: Call[];
  acquiredAt: number | null;
}

export interface HandoverSteps {
  trials: number;
  /** What the follower sent first after the release: "claim" (a notice leads straight to one). */
  firstStatement: string;
  /** close() called → the release statement sent (the leader's own steps: stop, end the term). */
  stopToReleaseSent: LatencyStats;
  /** The release statement's round trip (its commit and NOTIFY included). */
  release: LatencyStats;
  /** Release sent → the follower's first statement sent: commit, notice delivery, wake-up. */
  releaseToFollowerSends: LatencyStats;
  /** The follower's claim round trip. */
  claim: LatencyStats;
  /** close() called → the follower's elector leads. */
  stopToHeld: LatencyStats;
}

const quiet = { info() {}, warn() {} };

async function openPod(context: BenchContext, holder: string): Promise<Pod> {
  const leases = await openLeases({
    connectionString: context.databaseUrl,
    table: TABLE,
    holder,
    logger: quiet,
  });
  const calls: Call[] = [];
  const store = leases.store as unknown as Record<string, (...args: unknown[]) => Promise<unknown>>;
  for (const kind of ["read", "claim", "release", "releaseMany"]) {
    const original = store[kind]?.bind(leases.store);
    if (!original) continue;
    store[kind] = async (...args: unknown[]) => {
      const call = { kind, sentAt: performance.now(), answeredAt: 0 };
      calls.push(call);
      try {
        return await original(...args);
      } finally {
        call.answeredAt = performance.now();
      }
    };
  }
  const pod: Pod = { leases, elector: leases.campaign(KEY), calls, acquiredAt: null };
  pod.elector.on("transition", (t) => {
    if (t.outcome === "acquired") pod.acquiredAt = performance.now();
  });
  return pod;
}

async function until(done: () => boolean, signal: AbortSignal): Promise<void> {
  for (let waited = 0; !done(); waited++) {
    signal.throwIfAborted();
    if (waited > 30_000) throw new Error("bench: the handover did not complete within 30 s");
    await delay(1);
  }
}

export async function measureHandoverSteps(context: BenchContext, trials: number): Promise<HandoverSteps> {
  const samples = {
    stop: [] as number[],
    release: [] as number[],
    wake: [] as number[],
    claim: [] as number[],
    held: [] as number[],
  };
  let firstStatement = "";
  let leader = await openPod(context, "handover-0");
  try {
    await until(() => leader.elector.isLeader(), context.signal);
    for (let trial = 1; trial <= trials; trial++) {
      const follower = await openPod(context, `handover-${trial}`);
      await until(
        () => follower.calls.length > 0 && follower.calls.every((c) => c.answeredAt > 0),
        context.signal,
      );
      await delay(200, undefined, { signal: context.signal }); // a quiet follower, waiting on its feed
      const before = follower.calls.length;
      const t0 = performance.now();
      await leader.leases.close();
      await until(() => follower.acquiredAt !== null, context.signal);
      const release = leader.calls.find((c) => c.kind.startsWith("release"));
      const first = follower.calls[before];
      const claim = follower.calls.slice(before).find((c) => c.kind === "claim");
      if (!release || !first || !claim || follower.acquiredAt === null)
        throw new Error("bench: a handover step is missing");
      firstStatement = first.kind;
      samples.stop.push(release.sentAt - t0);
      samples.release.push(release.answeredAt - release.sentAt);
      samples.wake.push(first.sentAt - release.sentAt);
      samples.claim.push(claim.answeredAt - claim.sentAt);
      samples.held.push(follower.acquiredAt - t0);
      leader = follower;
    }
  } finally {
    await leader.leases.close();
  }
  return {
    trials,
    firstStatement,
    stopToReleaseSent: latencyStats(samples.stop, 1),
    release: latencyStats(samples.release, 1),
    releaseToFollowerSends: latencyStats(samples.wake, 1),
    claim: latencyStats(samples.claim, 1),
    stopToHeld: latencyStats(samples.held, 1),
  };
}

export function handoverStepsTable(f: HandoverSteps): Table {
  const row = (step: string, s: LatencyStats) => [step, ms(s.p50Ms), ms(s.p99Ms)];
  return {
    title: `Graceful handover, database side, step by step (${f.trials} trials, in one process)`,
    columns: ["step", "p50 ms", "p99 ms"],
    rows: [
      row("close() → release sent", f.stopToReleaseSent),
      row("release round trip (commit, NOTIFY)", f.release),
      row(`release sent → follower sends its ${f.firstStatement}`, f.releaseToFollowerSends),
      row("follower's claim round trip", f.claim),
      row("close() → follower leads", f.stopToHeld),
    ],
    notes: [
      "Each pod is its own openLeases (pool, LISTEN connection); the follower waits on its healthy feed.",
      "A notice leads straight to a claim (no read first): the claim is conditional on the server, so a forged notice costs one failed claim.",
      "The Kubernetes side (the new leader's peer demotion list and its patches) is the peers group's labelled minus held figure.",
    ],
  };
}
