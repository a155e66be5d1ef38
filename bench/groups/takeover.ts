// Figure group "takeover": leadership moving without waiting out the lease. A SIGKILL followed by
// the pod's process started again in place, for pglease's restart takeover, client-go (a new
// identity per process, its usual setup, and the pod's name kept as identity) and the advisory
// lock; a SIGKILL without restart under --session-takeover, whose neighbours are the peers group's
// crash rows; and the application in the leader's pod turning unready under --health-gate pod.
import type { BenchContext, FigureGroup, GroupResult } from "../group.ts";
import { failoverTrial, type TrialResult } from "../peers/failover-trial.ts";
import { type HealthTrialResult, healthTrial } from "../peers/health-trial.ts";
import { type KubeBackend, kubeBackend } from "../peers/kube-fixture.ts";
import { Lane, type LaneEnvironment } from "../peers/lane.ts";
import { type RestartTrialResult, restartTrial } from "../peers/restart-trial.ts";
import { healthGraceMs, type PeerTiming, SYSTEMS, type SystemId } from "../peers/systems.ts";
import { ms } from "../report.ts";
import { type Spread, spread } from "./peers.ts";
import { takeoverTables } from "./takeover-tables.ts";

export interface RestartSeries {
  system: SystemId;
  label: string;
  lanes: number;
  trials: RestartTrialResult[];
  holds: Spread;
  start: Spread;
  overStart: Spread;
  /** Trials whose new term was the restarted process's. */
  restartedLed: number;
}

export interface SessionCrashSeries {
  system: SystemId;
  label: string;
  trials: TrialResult[];
  holds: Spread;
  /** holds − the follower retry interval: what the takeover adds to the followers' next read. */
  overRetry: Spread;
}

export interface HealthSeries {
  system: SystemId;
  label: string;
  graceMs: number;
  trials: HealthTrialResult[];
  holds: Spread;
  labelled: Spread;
  overGrace: Spread;
}

export interface TakeoverFigures {
  timing: PeerTiming;
  kube: KubeBackend;
  restart: RestartSeries[];
  crash: SessionCrashSeries[];
  health: HealthSeries[];
}

type Trial<T> = (lane: Lane) => Promise<T>;

/** `trials` trials over `lanes` elections of `system` side by side; the first failure stops the rest. */
async function runSeries<T extends { holdsMs: number }>(
  system: SystemId,
  lanes: number,
  trials: number,
  trial: Trial<T>,
  context: BenchContext,
  env: LaneEnvironment,
): Promise<T[]> {
  const perLane = Math.ceil(trials / lanes);
  const runLane = async (index: number): Promise<T[]> => {
    const name = `takeover-${system}-${index + 1}`;
    const lane = await Lane.open(name, SYSTEMS[system], context.budget.peerTiming, env);
    const results: T[] = [];
    try {
      for (let i = 0; i < perLane; i++) {
        results.push(await trial(lane));
        context.progress(
          `takeover: ${name} trial ${i + 1}/${perLane}: holds ${ms(results[i]?.holdsMs ?? 0)} ms`,
        );
      }
      return results;
    } finally {
      await lane.close();
    }
  };
  return (await Promise.all(Array.from({ length: lanes }, (_, i) => runLane(i)))).flat();
}

function restartSeries(system: SystemId, lanes: number, trials: RestartTrialResult[]): RestartSeries {
  return {
    system,
    label: SYSTEMS[system].label,
    lanes,
    trials,
    holds: spread(trials.map((t) => t.holdsMs)),
    start: spread(trials.map((t) => t.startMs)),
    overStart: spread(trials.map((t) => t.overStartMs)),
    restartedLed: trials.filter((t) => t.restartedLeads).length,
  };
}

export async function runTakeover(context: BenchContext): Promise<GroupResult<TakeoverFigures>> {
  const { crashTrials, slowLanes, peerTiming } = context.budget;
  const kube = await kubeBackend();
  if (!kube.clientGo) context.progress(`takeover: client-go not measured: ${kube.reason}`);
  const stop = new AbortController();
  const env: LaneEnvironment = {
    benchDatabaseUrl: context.databaseUrl,
    signal: AbortSignal.any([context.signal, stop.signal]),
  };
  const guard = <T>(work: Promise<T>) =>
    work.catch((error: unknown) => {
      stop.abort(error);
      throw error;
    });
  const restart = (system: SystemId, lanes: number) =>
    guard(runSeries(system, lanes, crashTrials, restartTrial, context, env)).then((trials) =>
      restartSeries(system, lanes, trials),
    );
  // client-go with a new identity waits out the whole lease per trial: its lanes run first, alone,
  // so the quick series after them share the host with fewer starting processes.
  context.progress(`takeover: in-place restarts and session takeover (${peerTiming.name})`);
  const slow = kube.clientGo ? [await restart("client-go", slowLanes)] : [];
  const [quick, sessionTrials, healthTrials] = await Promise.all([
    Promise.all([
      restart("pglease", 1),
      ...(kube.clientGo ? [restart("client-go-same-identity", 1)] : []),
      restart("advisory-lock", 1),
    ]),
    guard(
      runSeries(
        "pglease-session-takeover",
        1,
        crashTrials,
        (lane) => failoverTrial(lane, "SIGKILL"),
        context,
        env,
      ),
    ),
    guard(runSeries("pglease-health-gate", 1, crashTrials, healthTrial, context, env)),
  ]);
  const health: HealthSeries[] = [
    {
      system: "pglease-health-gate",
      label: SYSTEMS["pglease-health-gate"].label,
      graceMs: healthGraceMs(peerTiming),
      trials: healthTrials,
      holds: spread(healthTrials.map((t) => t.holdsMs)),
      labelled: spread(healthTrials.map((t) => t.labelledMs)),
      overGrace: spread(healthTrials.map((t) => t.overGraceMs)),
    },
  ];
  const crash: SessionCrashSeries[] = [
    {
      system: "pglease-session-takeover",
      label: SYSTEMS["pglease-session-takeover"].label,
      trials: sessionTrials,
      holds: spread(sessionTrials.map((t) => t.holdsMs)),
      overRetry: spread(sessionTrials.map((t) => t.holdsMs - peerTiming.retryMs)),
    },
  ];
  const order: SystemId[] = ["pglease", "client-go", "client-go-same-identity", "advisory-lock"];
  const all = [...slow, ...quick];
  const figures: TakeoverFigures = {
    timing: peerTiming,
    kube,
    restart: order.flatMap((id) => all.filter((s) => s.system === id)),
    crash,
    health,
  };
  return { group: "takeover", figures, tables: takeoverTables(figures) };
}

export const takeoverGroup: FigureGroup = {
  name: "takeover",
  description:
    "leadership moving without waiting out the lease: restart in place, --session-takeover, application unready under --health-gate",
  run: runTakeover,
};
