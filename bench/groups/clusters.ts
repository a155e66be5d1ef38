// Figure group "clusters": pglease failover when the candidates of one election run in two
// Kubernetes clusters (each with its own API server and --cluster-name, one database), crash and
// graceful, at the peers group's timing so the rows sit next to its single-cluster pglease rows.
// The new leader may be in either cluster; it labels its pod in its own cluster only.
import type { BenchContext, FigureGroup, GroupResult, Table } from "../group.ts";
import type { PeerTiming } from "../peers/systems.ts";
import { count, ms } from "../report.ts";
import { type FailoverSeries, runPhase, type Spread } from "./peers.ts";

export interface ClusterFigures {
  timing: PeerTiming;
  clusters: number;
  candidatesPerElection: number;
  /** Two namespaces of one kube-apiserver stand in for the two clusters' API servers. */
  apiServers: string;
  series: FailoverSeries[];
}

const pair = (s: Spread | null) => (s ? [ms(s.p50Ms), ms(s.p99Ms)] : ["-", "-"]);

function clustersTable(figures: ClusterFigures): Table {
  return {
    title: `Failover across ${figures.clusters} clusters: leader stopped → new leader, ${figures.timing.name}`,
    columns: ["stop", "trials", "holds p50 ms", "holds p99 ms", "labelled p50 ms", "labelled p99 ms"],
    rows: figures.series.map((s) => [
      s.event === "crash" ? "SIGKILL" : "SIGTERM",
      count(s.trials.length),
      ...pair(s.holds),
      ...pair(s.published),
    ]),
    notes: [
      `${figures.candidatesPerElection} candidates per election, taking the ${figures.clusters} clusters in turn; ${figures.apiServers}.`,
      "holds and labelled as in the peers group's failover table: the new leader may run in either cluster and labels its pod in its own.",
    ],
  };
}

export async function runClusters(context: BenchContext): Promise<GroupResult<ClusterFigures>> {
  const { budget } = context;
  context.progress(`clusters: crashes and graceful stops across two clusters (${budget.peerTiming.name})`);
  const series = await runPhase(
    [
      { system: "pglease-two-clusters", event: "crash", lanes: budget.slowLanes, trials: budget.crashTrials },
      { system: "pglease-two-clusters", event: "graceful", lanes: 1, trials: budget.gracefulTrials },
    ],
    context,
  );
  const figures: ClusterFigures = {
    timing: budget.peerTiming,
    clusters: 2,
    candidatesPerElection: 3,
    apiServers: "each cluster's API server a namespace of its own, with its own ServiceAccount token",
    series,
  };
  return { group: "clusters", figures, tables: [clustersTable(figures)] };
}

export const clustersGroup: FigureGroup = {
  name: "clusters",
  description: "pglease failover with the candidates of one election in two clusters",
  run: runClusters,
};
