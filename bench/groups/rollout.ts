// Figure group "rollout": the chart's Deployment of 3 replicas rolled to a new revision again and
// again on the API server, pods created and deleted as the Deployment controller does, each pod's
// election a real process: pglease (the chart's sidecar environment) beside client-go's Lease
// election with ReleaseOnCancel, the chart-equivalent. Per rollout: how many times leadership
// changed hands and how long no pod was shown leading. Then pglease's planned handover to a named
// pod, timed to that pod labelled leader; client-go has no planned handover.

import { openLeases } from "../../src/leases/open-leases.ts";
import type { BenchContext, FigureGroup, GroupResult, Table } from "../group.ts";
import { type KubeBackend, kubeBackend } from "../peers/kube-fixture.ts";
import type { LaneEnvironment } from "../peers/lane.ts";
import { RolloutLane, type RolloutSystem, type RolloutTrial } from "../peers/rollout-lane.ts";
import { type PeerTiming, SYSTEMS } from "../peers/systems.ts";
import { count, ms } from "../report.ts";
import { type Spread, spread } from "./peers.ts";

export interface RolloutSeries {
  system: RolloutSystem;
  label: string;
  trials: RolloutTrial[];
  changes: { p50: number; max: number };
  unlabelled: Spread;
}

export interface HandoverLatency {
  system: RolloutSystem;
  label: string;
  /** handover request → the named pod labelled leader; null where the system has no handover. */
  toLabelled: Spread | null;
  note: string;
}

export interface RolloutFigures {
  timing: PeerTiming;
  kube: KubeBackend;
  deployment: { replicas: number; maxSurge: number; maxUnavailable: number };
  rollouts: RolloutSeries[];
  handover: HandoverLatency[];
}

const LABELS: Record<RolloutSystem, string> = {
  pglease: "pglease (the chart's sidecar)",
  "client-go-release": SYSTEMS["client-go-release"].label,
};

function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor((sorted.length - 1) / 2)] ?? Number.NaN;
}

async function measureRollouts(
  lane: RolloutLane,
  rollouts: number,
  context: BenchContext,
): Promise<RolloutSeries> {
  const trials: RolloutTrial[] = [];
  for (let i = 1; i <= rollouts; i++) {
    context.signal.throwIfAborted();
    const trial = await lane.rollout();
    context.progress(
      `rollout: ${lane.system} rollout ${i}/${rollouts}: ${trial.changes} change(s) (${trial.leaders.join(" → ")}), ${Math.round(trial.unlabelledMs)} ms unlabelled`,
    );
    trials.push(trial);
  }
  const changes = trials.map((t) => t.changes);
  return {
    system: lane.system,
    label: LABELS[lane.system],
    trials,
    changes: { p50: median(changes), max: Math.max(...changes) },
    unlabelled: spread(trials.map((t) => t.unlabelledMs)),
  };
}

async function measureHandovers(lane: RolloutLane, trials: number, context: BenchContext): Promise<Spread> {
  const operator = await openLeases({
    connectionString: lane.database?.url,
    holder: "bench-operator",
    restartTakeover: false,
  });
  try {
    const samples: number[] = [];
    for (let i = 0; i < trials; i++) {
      context.signal.throwIfAborted();
      samples.push(await lane.handover((to) => operator.handover("pglease", { to })));
    }
    return spread(samples);
  } finally {
    await operator.close();
  }
}

async function withLane<T>(
  system: RolloutSystem,
  context: BenchContext,
  use: (lane: RolloutLane) => Promise<T>,
): Promise<T> {
  const env: LaneEnvironment = { benchDatabaseUrl: context.databaseUrl, signal: context.signal };
  const lane = await RolloutLane.open(system, context.budget.peerTiming, env);
  try {
    return await use(lane);
  } finally {
    await lane.close();
  }
}

export async function runRollout(context: BenchContext): Promise<GroupResult<RolloutFigures>> {
  const { budget } = context;
  const kube = await kubeBackend();
  // Five rollouts in a full run, two in a quick one: each is three pods started and three stopped.
  const rollouts = Math.min(5, Math.max(1, Math.ceil(budget.gracefulTrials / 2)));
  const handovers = budget.gracefulTrials * 2;
  context.progress(`rollout: pglease, ${rollouts} rollouts of 3 replicas, then ${handovers} handovers`);
  let deployment: RolloutFigures["deployment"] = { replicas: 0, maxSurge: 0, maxUnavailable: 0 };
  const [pglease, toLabelled] = await withLane("pglease", context, async (lane) => {
    deployment = lane.strategy;
    return [await measureRollouts(lane, rollouts, context), await measureHandovers(lane, handovers, context)];
  });
  const series: RolloutSeries[] = [pglease as RolloutSeries];
  if (kube.clientGo) {
    context.progress(`rollout: client-go, ${rollouts} rollouts (${budget.peerTiming.name})`);
    series.push(
      await withLane("client-go-release", context, (lane) => measureRollouts(lane, rollouts, context)),
    );
  } else context.progress(`rollout: client-go not measured: ${kube.reason}`);
  const figures: RolloutFigures = {
    timing: budget.peerTiming,
    kube,
    deployment,
    rollouts: series,
    handover: [
      {
        system: "pglease",
        label: LABELS.pglease,
        toLabelled: toLabelled as Spread,
        note: "leases.handover(KEY, { to: POD }), what `pglease handover KEY --to POD` runs, without the CLI's start-up",
      },
      {
        system: "client-go-release",
        label: LABELS["client-go-release"],
        toLabelled: null,
        note: "no planned handover: leadership moves only when the leader stops or loses its Lease",
      },
    ],
  };
  return { group: "rollout", figures, tables: rolloutTables(figures) };
}

function rolloutTables(figures: RolloutFigures): Table[] {
  const { replicas, maxSurge, maxUnavailable } = figures.deployment;
  return [
    {
      title: `Rolling update of the chart's Deployment (${replicas} replicas, maxSurge ${maxSurge}, maxUnavailable ${maxUnavailable}), ${figures.timing.name}`,
      columns: [
        "election",
        "rollouts",
        "changes per rollout (each)",
        "changes max",
        "unlabelled p50 ms",
        "unlabelled max ms",
      ],
      rows: figures.rollouts.map((s) => [
        s.label,
        count(s.trials.length),
        s.trials.map((t) => t.changes).join(", "),
        count(s.changes.max),
        ms(s.unlabelled.p50Ms),
        ms(s.unlabelled.maxMs),
      ]),
      notes: [
        "Pods created and deleted as the Deployment controller does: a new pod up to replicas + maxSurge, an old pod deleted once enough are Ready; its deletion is the SIGTERM to its process. Among old pods, the one leading goes first (the ReplicaSet's choice among equals; the order that moves leadership most).",
        "changes: leadership moved to another pod; unlabelled: no pod shown leading (pglease: its role label; client-go, which labels nothing: its Lease naming a holder), from the first old pod deleted until a new pod leads.",
        `${figures.kube.apiServer}${figures.kube.clientGo ? `; ${figures.kube.clientGo}` : `; client-go not measured: ${figures.kube.reason}`}.`,
      ],
    },
    {
      title: "Planned handover to a named pod: request → that pod labelled leader",
      columns: ["election", "trials", "p50 ms", "p99 ms", "max ms", "note"],
      rows: figures.handover.map((h) => [
        h.label,
        h.toLabelled ? count(h.toLabelled.samples) : "-",
        h.toLabelled ? ms(h.toLabelled.p50Ms) : "-",
        h.toLabelled ? ms(h.toLabelled.p99Ms) : "-",
        h.toLabelled ? ms(h.toLabelled.maxMs) : "-",
        h.note,
      ]),
      notes: [
        "Each trial hands over to another pod of the Deployment, from the call until the API server accepts the patch labelling the target leader.",
      ],
    },
  ];
}

export const rolloutGroup: FigureGroup = {
  name: "rollout",
  description:
    "leadership changes and unlabelled time in a rolling update, vs client-go; planned handover latency",
  run: runRollout,
};
