// Figure group "real-cluster": graceful handovers where users feel them, in the real single-node
// cluster test/cluster boots (kubelet, containerd, the Deployment and EndpointSlice controllers,
// kube-proxy): charts/pglease installed with helm, beside a Deployment of the same shape whose pods
// run client-go's Lease election as a labelling sidecar (test/kube-cluster-go/client-go-labeller).
// Per system: the leader pod deleted (`kubectl delete pod`) and `kubectl rollout restart`; per
// trial, the time the leader Service listed no ready pod and the time it listed two, read off a
// watch on its EndpointSlices. Needs root and the cluster's programs (docs/cluster.md); without
// them it says why in one line and measures nothing. Hold the machine's cluster lock to run it:
//   flock /tmp/pglease-cluster.lock npm run bench -- --only real-cluster
import { loadavg } from "node:os";
import { buildImage, importImage } from "../../test/cluster/images.ts";
import { bridgePostgres } from "../../test/cluster/pg-bridge.ts";
import { releaseIn, releaseValues } from "../../test/cluster/release.ts";
import { type ClusterSession, helmInstall, openCluster } from "../../test/cluster/session.ts";
import { clusterToolsAvailable } from "../../test/cluster/tools.ts";
import { chartDir } from "../../test/support/kube/chart.ts";
import {
  deleteLeaderTrial,
  type HandoverTrial,
  rolloutTrial,
  type Workload,
} from "../cluster/handover-trials.ts";
import { applyLabellerWorkload } from "../cluster/labeller-workload.ts";
import type { BenchContext, FigureGroup, GroupResult, Table } from "../group.ts";
import { CLIENT_GO_DEFAULTS } from "../peers/systems.ts";
import { count, ms } from "../report.ts";
import { type Spread, spread } from "./peers.ts";

export type ClusterSystem = "pglease" | "client-go-labeller";
export type ClusterScenario = "delete" | "rollout";

export interface ClusterSeries {
  system: ClusterSystem;
  scenario: ClusterScenario;
  trials: HandoverTrial[];
  leaderless: Spread;
  newLeaderEndpoint: Spread;
  /** The longest time any trial's leader Service listed two ready pods. */
  twoReadyMaxMs: number;
}

export interface ClusterRatio {
  scenario: ClusterScenario;
  /** client-go's leaderless time over pglease's: how many times shorter pglease's is. */
  p50: number;
  p99: number;
}

export interface RealClusterFigures {
  /** Why nothing was measured, or null. */
  skipped: string | null;
  replicas: number;
  systems: Record<ClusterSystem, string>;
  series: ClusterSeries[];
  ratios: ClusterRatio[];
  /** 1-minute load average as the group began and ended: the node shares the host's cores. */
  loadAverage: { atStart: number; atEnd: number };
}

const REPLICAS = 3;
const SCENARIOS: Record<ClusterScenario, string> = {
  delete: "leader pod deleted",
  rollout: "rollout restart",
};
const seconds = (value: number) => `${value / 1000} s`;
const SYSTEMS: Record<ClusterSystem, string> = {
  pglease: "pglease (charts/pglease, its defaults: lease 15 s, native sidecar)",
  "client-go-labeller": `client-go Lease labeller (ReleaseOnCancel, lease ${seconds(CLIENT_GO_DEFAULTS.leaseMs)}, renew deadline ${seconds(CLIENT_GO_DEFAULTS.renewDeadlineMs)}, retry ${seconds(CLIENT_GO_DEFAULTS.retryMs)})`,
};

/**
 * A few trials, so the group takes minutes: each waits for a replacement pod to be Ready (a deletion
 * took 2–6 s here, a rollout 7–19 s, the whole group with the boot about 3 minutes).
 */
function trialCounts(context: BenchContext): Record<ClusterScenario, number> {
  const { gracefulTrials } = context.budget;
  return { delete: Math.min(5, gracefulTrials), rollout: Math.min(3, Math.ceil(gracefulTrials / 3)) };
}

async function measure(
  session: ClusterSession,
  system: ClusterSystem,
  workload: Workload,
  context: BenchContext,
): Promise<ClusterSeries[]> {
  const out: ClusterSeries[] = [];
  const counts = trialCounts(context);
  for (const scenario of ["delete", "rollout"] as const) {
    const trials: HandoverTrial[] = [];
    for (let i = 1; i <= counts[scenario]; i++) {
      context.signal.throwIfAborted();
      const trial =
        scenario === "delete"
          ? await deleteLeaderTrial(session, workload)
          : await rolloutTrial(session, workload);
      context.progress(
        `real-cluster: ${system} ${SCENARIOS[scenario]} ${i}/${counts[scenario]}: ${trial.leaderlessMs} ms leaderless, ${trial.twoReadyMs} ms with two, ${trial.leaderChanges} change(s), settled in ${trial.settledMs} ms`,
      );
      trials.push(trial);
    }
    out.push({
      system,
      scenario,
      trials,
      leaderless: spread(trials.map((t) => t.leaderlessMs)),
      newLeaderEndpoint: spread(trials.map((t) => t.newLeaderEndpointMs)),
      twoReadyMaxMs: Math.max(...trials.map((t) => t.twoReadyMs)),
    });
  }
  return out;
}

async function namespaceFor(session: ClusterSession, prefix: string): Promise<string> {
  const namespace = `${prefix}-${Date.now().toString(36)}`;
  await session.kubectl(["create", "namespace", namespace]);
  return namespace;
}

async function measurePglease(
  session: ClusterSession,
  databaseUrl: string,
  context: BenchContext,
): Promise<ClusterSeries[]> {
  const namespace = await namespaceFor(session, "bench-pglease");
  const release = releaseIn("orders", namespace);
  try {
    await helmInstall(
      session,
      release.name,
      namespace,
      chartDir,
      releaseValues(session, databaseUrl, REPLICAS),
    );
    return await measure(
      session,
      "pglease",
      {
        namespace,
        // The helm test pod carries the workload's labels too.
        selector: `${release.selector},app.kubernetes.io/component!=test`,
        leaderService: release.leaderService,
        deployment: release.workload,
        replicas: REPLICAS,
      },
      context,
    );
  } finally {
    await session.helm(["uninstall", release.name, "--namespace", namespace, "--wait"]);
    await session.kubectl(["delete", "namespace", namespace, "--wait=false"]);
  }
}

async function measureClientGo(
  session: ClusterSession,
  databaseUrl: string,
  context: BenchContext,
): Promise<ClusterSeries[]> {
  const labeller = await buildImage("labeller");
  await importImage(session.tools, labeller);
  const namespace = await namespaceFor(session, "bench-client-go");
  try {
    // The same application container as the chart's release: its image, its command.
    const { app } = releaseValues(session, databaseUrl, REPLICAS);
    const workload = await applyLabellerWorkload(
      session,
      namespace,
      REPLICAS,
      { image: session.image.reference, command: app.command },
      labeller,
      CLIENT_GO_DEFAULTS,
    );
    return await measure(session, "client-go-labeller", workload, context);
  } finally {
    await session.kubectl(["delete", "namespace", namespace, "--wait=true", "--timeout=120s"]);
  }
}

function ratios(series: ClusterSeries[]): ClusterRatio[] {
  const out: ClusterRatio[] = [];
  for (const scenario of ["delete", "rollout"] as const) {
    const of = (system: ClusterSystem) => series.find((s) => s.system === system && s.scenario === scenario);
    const pglease = of("pglease");
    const clientGo = of("client-go-labeller");
    if (!pglease || !clientGo) continue;
    out.push({
      scenario,
      p50: clientGo.leaderless.p50Ms / pglease.leaderless.p50Ms,
      p99: clientGo.leaderless.p99Ms / pglease.leaderless.p99Ms,
    });
  }
  return out;
}

/** "8.1× shorter" (pglease's leaderless time against client-go's), "1.5× longer". */
export function shorterText(factor: number): string {
  if (!Number.isFinite(factor) || factor <= 0) return "n/a";
  const [value, word] = factor >= 1 ? [factor, "shorter"] : [1 / factor, "longer"];
  return `${value >= 10 ? value.toFixed(0) : value.toFixed(1)}× ${word}`;
}

function realClusterTables(figures: RealClusterFigures): Table[] {
  if (figures.skipped) {
    return [
      {
        title: "Graceful handover in the real cluster: not measured",
        columns: ["reason"],
        rows: [[figures.skipped]],
        notes: ["Needs root and the cluster's programs: docs/cluster.md."],
      },
    ];
  }
  const load = `load average ${figures.loadAverage.atStart.toFixed(1)} → ${figures.loadAverage.atEnd.toFixed(1)} on this host during the group`;
  return [
    {
      title: `Graceful handover in the real cluster (${figures.replicas} replicas): the leader Service's ready endpoints`,
      columns: [
        "disruption",
        "election",
        "trials",
        "leaderless p50 ms",
        "leaderless p99 ms",
        "leaderless max ms",
        "two ready max ms",
        "new leader endpoint p50 ms",
        "leader changes (each)",
      ],
      rows: figures.series.map((s) => [
        SCENARIOS[s.scenario],
        figures.systems[s.system],
        count(s.trials.length),
        ms(s.leaderless.p50Ms),
        ms(s.leaderless.p99Ms),
        ms(s.leaderless.maxMs),
        ms(s.twoReadyMaxMs),
        ms(s.newLeaderEndpoint.p50Ms),
        s.trials.map((t) => t.leaderChanges).join(", "),
      ]),
      notes: [
        "leaderless: the leader Service's EndpointSlices list no ready pod (what kube-proxy routes by), from `kubectl delete pod` / `kubectl rollout restart` until every pod is Ready again with one leader endpoint; two ready: they list two or more. With this few trials p99 is the largest trial.",
        "new leader endpoint: from the command until the Service first lists one ready pod other than the old leader. leader changes: how many times that one ready pod became another.",
        `Real kubelet, containerd and runc, kube-controller-manager, kube-proxy (docs/cluster.md); ${load}.`,
      ],
    },
    {
      title: "pglease's leaderless time beside the client-go labeller's",
      columns: ["disruption", "p50", "p99"],
      rows: figures.ratios.map((r) => [SCENARIOS[r.scenario], shorterText(r.p50), shorterText(r.p99)]),
      notes: ["client-go's leaderless time over pglease's, per percentile."],
    },
  ];
}

export async function runRealCluster(context: BenchContext): Promise<GroupResult<RealClusterFigures>> {
  const atStart = loadavg()[0] ?? 0;
  const done = (skipped: string | null, series: ClusterSeries[]): GroupResult<RealClusterFigures> => {
    const figures: RealClusterFigures = {
      skipped,
      replicas: REPLICAS,
      systems: SYSTEMS,
      series,
      ratios: ratios(series),
      loadAverage: { atStart, atEnd: loadavg()[0] ?? 0 },
    };
    return { group: "real-cluster", figures, tables: realClusterTables(figures) };
  };
  const available = await clusterToolsAvailable();
  if (!available.ok) {
    context.progress(`real-cluster: skipped: ${available.reason}`);
    return done(available.reason, []);
  }
  context.progress(
    "real-cluster: opening the cluster (boots the node unless one is up; builds the images when missing)",
  );
  const session = await openCluster(available.tools);
  const series: ClusterSeries[] = [];
  let guardDrops = 0;
  try {
    context.progress(
      `real-cluster: node ${session.booted ? `booted in ${session.bootMs} ms` : "already up"}`,
    );
    const bridge = await bridgePostgres(context.databaseUrl);
    try {
      const counts = trialCounts(context);
      context.progress(`real-cluster: pglease, ${counts.delete} deletions, ${counts.rollout} rollouts`);
      series.push(...(await measurePglease(session, bridge.podUrl, context)));
      context.progress("real-cluster: client-go labeller, the same disruptions");
      series.push(...(await measureClientGo(session, bridge.podUrl, context)));
    } finally {
      await bridge.close();
    }
  } finally {
    // Tears the node down when this group booted it, however the trials ended.
    const closed = await session.close();
    guardDrops = closed.guardDrops ?? 0;
    context.progress(`real-cluster: teardown ${JSON.stringify(closed)}`);
  }
  // The network rule (docs/cluster.md): nothing of the cluster's addresses leaves the machine.
  if (guardDrops) throw new Error(`the host guard dropped ${guardDrops} packets of the cluster's range`);
  return done(null, series);
}

export const realClusterGroup: FigureGroup = {
  name: "real-cluster",
  description:
    "graceful handover in the real cluster (pod deleted, rollout restart): leader Service leaderless and two-endpoint time, pglease vs a client-go labeller",
  run: runRealCluster,
};
