// Figure group "peers": pglease side by side with what users would pick instead — client-go's
// Lease election and a session advisory lock — in the same run, each candidate a real process.
// Crash (SIGKILL) and graceful (SIGTERM) handovers are timed over many trials, while one quiet
// election per system is watched for its steady-state cost.
import pg from "pg";
import type { BenchContext, FigureGroup, GroupResult } from "../group.ts";
import { latencyStats } from "../measure.ts";
import { failoverTrial, type TrialResult } from "../peers/failover-trial.ts";
import { type KubeBackend, kubeBackend } from "../peers/kube-fixture.ts";
import { Lane, type LaneEnvironment } from "../peers/lane.ts";
import { type PeerTiming, SYSTEMS, type SystemId } from "../peers/systems.ts";
import { ms } from "../report.ts";
import { peersTables, ratiosOf, type SeriesRatio } from "./peers-tables.ts";
import { measureSteadyCost, STEADY_SYSTEMS, type SteadyCost } from "./steady-cost.ts";

export type HandoverEvent = "crash" | "graceful";

export interface Spread {
  samples: number;
  p50Ms: number;
  p99Ms: number;
  meanMs: number;
  minMs: number;
  maxMs: number;
}

export interface FailoverSeries {
  system: SystemId;
  label: string;
  event: HandoverEvent;
  /** Elections that ran this series side by side, each with three candidates. */
  lanes: number;
  trials: TrialResult[];
  holds: Spread;
  published: Spread | null;
  expiryToClaim: Spread | null;
  /** pglease after SIGTERM: → the stopping pod's demotion arrives at the API server, and → its answer. */
  demoted: Spread | null;
  demotedAnswered: Spread | null;
}

export interface PeerFigures {
  timing: PeerTiming;
  candidatesPerElection: number;
  /** The API server and the client-go measured; client-go's rows are absent when it is null. */
  kube: KubeBackend;
  series: FailoverSeries[];
  steady: SteadyCost[];
  ratios: SeriesRatio[];
}

/** The order of the tables and the chart: crashes, then graceful stops, fastest design first. */
const SERIES_ORDER: Array<[HandoverEvent, SystemId]> = [
  ["crash", "pglease"],
  ["crash", "client-go"],
  ["crash", "advisory-lock"],
  ["graceful", "pglease"],
  ["graceful", "pglease-no-notify"],
  ["graceful", "client-go-release"],
  ["graceful", "client-go"],
  ["graceful", "advisory-lock"],
];

export interface SeriesPlan {
  system: SystemId;
  event: HandoverEvent;
  lanes: number;
  trials: number;
}

export function spread(values: number[]): Spread {
  const stats = latencyStats(values, 1);
  return {
    samples: stats.samples,
    p50Ms: stats.p50Ms,
    p99Ms: stats.p99Ms,
    meanMs: stats.meanMs,
    minMs: Math.min(...values),
    maxMs: Math.max(...values),
  };
}

function optionalSpread(values: Array<number | null>): Spread | null {
  const present = values.filter((v): v is number => v !== null);
  return present.length > 0 ? spread(present) : null;
}

async function runLane(
  plan: SeriesPlan,
  index: number,
  context: BenchContext,
  env: LaneEnvironment,
): Promise<TrialResult[]> {
  const name = `${plan.event}-${plan.system}-${index + 1}`;
  const lane = await Lane.open(name, SYSTEMS[plan.system], context.budget.peerTiming, env);
  const trials = Math.ceil(plan.trials / plan.lanes);
  const results: TrialResult[] = [];
  try {
    for (let i = 0; i < trials; i++) {
      const result = await failoverTrial(lane, plan.event === "crash" ? "SIGKILL" : "SIGTERM");
      results.push(result);
      const published = result.publishedMs === null ? "" : `, published ${ms(result.publishedMs)} ms`;
      context.progress(`peers: ${name} trial ${i + 1}/${trials}: holds ${ms(result.holdsMs)} ms${published}`);
    }
    return results;
  } finally {
    await lane.close();
  }
}

/** Every series of a phase at once, each on its own lanes; the first failure stops the rest. */
export async function runPhase(plans: SeriesPlan[], context: BenchContext): Promise<FailoverSeries[]> {
  const stop = new AbortController();
  const env: LaneEnvironment = {
    benchDatabaseUrl: context.databaseUrl,
    signal: AbortSignal.any([context.signal, stop.signal]),
  };
  const runs = plans.map((plan) =>
    Promise.all(
      Array.from({ length: plan.lanes }, (_, i) =>
        runLane(plan, i, context, env).catch((error: unknown) => {
          stop.abort(error);
          throw error;
        }),
      ),
    ),
  );
  const settled = await Promise.allSettled(runs);
  const failed = settled.find((r): r is PromiseRejectedResult => r.status === "rejected");
  if (failed) throw failed.reason;
  return plans.map((plan, i) => {
    const outcome = settled[i];
    const trials = outcome?.status === "fulfilled" ? outcome.value.flat() : [];
    return {
      system: plan.system,
      label:
        plan.event === "graceful" && plan.system === "client-go"
          ? `${SYSTEMS[plan.system].label}, no release`
          : SYSTEMS[plan.system].label,
      event: plan.event,
      lanes: plan.lanes,
      trials,
      holds: spread(trials.map((t) => t.holdsMs)),
      published: optionalSpread(trials.map((t) => t.publishedMs)),
      expiryToClaim: optionalSpread(trials.map((t) => t.expiryToClaimMs)),
      demoted: optionalSpread(trials.map((t) => t.demotedMs)),
      demotedAnswered: optionalSpread(trials.map((t) => t.demotedAnsweredMs)),
    };
  });
}

export async function runPeers(context: BenchContext): Promise<GroupResult<PeerFigures>> {
  const { budget } = context;
  const { crashTrials, gracefulTrials, slowLanes } = budget;
  const kube = await kubeBackend();
  // Without the real API server and client-go there is nothing client-go to measure.
  const measurable = (system: SystemId) => kube.clientGo !== null || SYSTEMS[system].kind !== "client-go";
  if (!kube.clientGo) context.progress(`peers: client-go not measured: ${kube.reason}`);
  // Series that wait out a whole lease per trial run first, side by side. The quick graceful ones
  // then run one system at a time: each trial restarts the stopped leader's process, and a process
  // starting takes a core for a few hundred ms, far more than the milliseconds another system's
  // handover beside it would be measured in.
  const slow: SeriesPlan[] = [
    { system: "pglease", event: "crash", lanes: slowLanes, trials: crashTrials },
    { system: "client-go", event: "crash", lanes: slowLanes, trials: crashTrials },
    { system: "advisory-lock", event: "crash", lanes: 1, trials: crashTrials },
    // Without a release the successor waits out the whole lease, as after a crash.
    { system: "client-go", event: "graceful", lanes: slowLanes, trials: gracefulTrials },
  ];
  const quick: SeriesPlan[] = [
    { system: "pglease", event: "graceful", lanes: 1, trials: gracefulTrials },
    { system: "pglease-no-notify", event: "graceful", lanes: 1, trials: gracefulTrials },
    { system: "client-go-release", event: "graceful", lanes: 1, trials: gracefulTrials },
    { system: "advisory-lock", event: "graceful", lanes: 1, trials: gracefulTrials },
  ];
  const statsPool = new pg.Pool({ connectionString: context.databaseUrl, max: 1 });
  // Databases are dropped with their sessions as lanes close: an idle connection ending then is expected.
  statsPool.on("error", () => {});
  const stopSteady = new AbortController();
  const steadyEnv: LaneEnvironment = {
    benchDatabaseUrl: context.databaseUrl,
    signal: AbortSignal.any([context.signal, stopSteady.signal]),
  };
  // The quiet elections are watched while the others hand over: they share nothing but the host.
  const steady = measureSteadyCost(
    steadyEnv,
    statsPool,
    budget.peerTiming,
    budget.steadyWindowMs,
    context.progress,
    STEADY_SYSTEMS.filter(measurable),
  );
  steady.catch(() => {});
  try {
    context.progress(`peers: crashes and graceful stops without release (${budget.peerTiming.name})`);
    const measured = await runPhase(
      slow.filter((plan) => measurable(plan.system)),
      context,
    );
    for (const plan of quick.filter((p) => measurable(p.system))) {
      context.progress(`peers: graceful handovers with a release, ${SYSTEMS[plan.system].label}`);
      measured.push(...(await runPhase([plan], context)));
    }
    const series = SERIES_ORDER.flatMap(([event, system]) =>
      measured.filter((s) => s.event === event && s.system === system),
    );
    context.progress("peers: waiting for the steady-state window to close");
    const steadyCosts = await steady;
    const figures: PeerFigures = {
      timing: budget.peerTiming,
      candidatesPerElection: 3,
      kube,
      series,
      steady: steadyCosts,
      ratios: ratiosOf(series, steadyCosts),
    };
    return { group: "peers", figures, tables: peersTables(figures) };
  } catch (error) {
    stopSteady.abort(error);
    await steady.catch(() => {});
    throw error;
  } finally {
    await statsPool.end();
  }
}

export const peersGroup: FigureGroup = {
  name: "peers",
  description: "failover and steady-state cost vs client-go Lease election and an advisory lock",
  run: runPeers,
};
