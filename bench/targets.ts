// The targets pglease is measured against, as data: what is promised, the figure of the results
// that says whether it is kept (a path, bench/figures.ts), and the threshold. The bench evaluates
// them over the results it writes, so a verdict is never written by hand: a target whose figure
// was not measured (its group not run, its series skipped) says so.
//
// To add one: append an entry whose `figure` path reads a number (or a yes/no) from a group's
// figures, and name its id in the docs' targets list (bench/docs/regions.ts) if it belongs there.
import { figureAt } from "./figures.ts";
import type { Table } from "./group.ts";
import { count, ms } from "./report.ts";

export type Verdict = "met" | "not met" | "not measured";

export interface TargetSpec {
  id: string;
  /** What is promised, in one line. */
  target: string;
  /** Where the measured figure is in the results' groups. */
  figure: string;
  /** "ms", or a unit word after the number ("per interval"); "" for yes/no figures. */
  unit: string;
  /** Met when `measured op threshold`. */
  op: "<" | "<=" | "==";
  threshold: number | boolean;
  /** Said beside the verdict: what the figure leaves out, or why the target stands as it does. */
  note?: string;
}

export interface TargetVerdict extends TargetSpec {
  measured: number | boolean | null;
  verdict: Verdict;
}

const PGLEASE_CRASH = "peers.series[event=crash][system=pglease]";
const ELECTORS_10K = "scale.electors[leases=10000]";
const PGLEASE_STEADY = "peers.steady[system=pglease]";
const PGLEASE_RESTART = "takeover.restart[system=pglease]";
const CLUSTER_DELETE = "real-cluster.series[system=pglease][scenario=delete]";

export const TARGETS: TargetSpec[] = [
  {
    id: "health-handover-labelled",
    target:
      "application unready in the leader's pod → a healthy pod labelled leader, over the grace period, p99",
    figure: "takeover.health[system=pglease-health-gate].overGrace.p99Ms",
    unit: "ms",
    op: "<=",
    threshold: 100,
    note: "the grace period is the operator's choice (--health-grace); client-go has no health input and keeps the Lease",
  },
  {
    id: "crash-claim-after-expiry",
    target: "crash: the new claim after the dead leader's server-side expiry, p99",
    figure: `${PGLEASE_CRASH}.expiryToClaim.p99Ms`,
    unit: "ms",
    op: "<=",
    threshold: 100,
  },
  {
    id: "restart-over-start",
    target: "SIGKILL and restart in place: the new term after the restarted process's start, p99",
    figure: `${PGLEASE_RESTART}.overStart.p99Ms`,
    unit: "ms",
    op: "<=",
    threshold: 100,
    note: "process start: spawn → the campaigning line; the kill → spawn gap counts against the target; below zero, the lease expired during the start and a follower took it",
  },
  {
    id: "session-takeover-crash",
    target: "SIGKILL without restart, --session-takeover: new term after the follower retry interval, p99",
    figure: "takeover.crash[system=pglease-session-takeover].overRetry.p99Ms",
    unit: "ms",
    op: "<=",
    threshold: 100,
  },
  {
    id: "graceful-held",
    target: "graceful handover (SIGTERM, notify on): the lease held by the follower, p99",
    figure: "peers.series[event=graceful][system=pglease].holds.p99Ms",
    unit: "ms",
    op: "<",
    threshold: 20,
    note: "counts the processes' scheduling on the shared host; the release reserves the lease for the best live candidate in the same statement; the database steps alone are the lease-ops group's graceful handover table",
  },
  {
    id: "graceful-labelled",
    target: "graceful handover (SIGTERM, notify on): the new leader holds and is labelled, p99",
    figure: "peers.series[event=graceful][system=pglease].published.p99Ms",
    unit: "ms",
    op: "<",
    threshold: 60,
    note: "the whole handover: after its claim the new leader lists its peers, patches them, then labels itself (three API round trips on kept-alive connections), the host's scheduling included: a busy shared host can miss it",
  },
  {
    id: "graceful-labelled-no-notify",
    target: "the same with --no-notify (behind a transaction-mode PgBouncer), p99",
    figure: "peers.series[event=graceful][system=pglease-no-notify].published.p99Ms",
    unit: "ms",
    op: "<",
    threshold: 150,
    note: "not reachable by design: followers find the release at their next read, up to one retry period later",
  },
  {
    id: "renew-10k-one-statement",
    target: "10,000 leases in one process (openLeases): renew statements per renew interval",
    figure: `${ELECTORS_10K}.renewStatementsPerInterval`,
    unit: "per interval",
    op: "<=",
    threshold: 1,
  },
  {
    id: "renew-10k-all-leading",
    target: "10,000 leases in one process: every elector still leading at the end of the window",
    figure: `${ELECTORS_10K}.allLeading`,
    unit: "",
    op: "==",
    threshold: true,
  },
  {
    id: "close-10k",
    target: "10,000 leases in one process: close() releases them all (one statement)",
    figure: `${ELECTORS_10K}.closeAllMs`,
    unit: "ms",
    op: "<",
    threshold: 200,
    note: "every term ends locally in one pass, then one statement releases them all, the candidates' withdrawal beside it; most of what remains is that statement (10,000 rows, their history entries and notices)",
  },
  {
    id: "steady-db-statements",
    target: "database statements from a quiet pod (notices on), at or below the advisory lock's polling",
    figure: `${PGLEASE_STEADY}.statements.perPodPerHour`,
    unit: "per pod-hour",
    op: "<=",
    threshold: 1_200,
    note: "the advisory lock's followers try every retry period (2 s at client-go's defaults): 1,200 per pod-hour with 3 pods; the steady-state table has both, measured",
  },
  {
    id: "pinned-connections",
    target: "connections pinned per pod: none from the pool, only the optional LISTEN",
    figure: `${PGLEASE_STEADY}.connections.pinnedPerPod`,
    unit: "per pod",
    op: "<=",
    threshold: 1,
  },
  {
    id: "steady-api-requests",
    target: "API server requests from a quiet pod, measured",
    figure: `${PGLEASE_STEADY}.apiRequests.perPodPerHour`,
    unit: "per pod-hour",
    op: "<=",
    threshold: 6,
    note: "a window shorter than the watch's 30–60 min sees one renewal or none: the expected figure below is the steadier one",
  },
  {
    id: "steady-api-requests-expected",
    target:
      "API server requests from a quiet pod, expected from its periods (one watch renewed every 30–60 min)",
    figure: `${PGLEASE_STEADY}.apiRequests.expectedPerPodPerHour`,
    unit: "per pod-hour",
    op: "<=",
    threshold: 6,
  },
  {
    id: "sidecar-memory",
    target: "pglease run publishing to its pod, as the image runs it: peak resident memory (VmHWM)",
    figure: "footprint.cli[variant=publishing to its pod].peakRssMb",
    unit: "MiB",
    op: "<=",
    threshold: 64,
    note: "start-up and the first publish included, over TLS to the API server; Node 24 itself is 42 MiB with an empty event loop, 52 MiB once node:http and node:https are loaded",
  },
  {
    id: "handover-to-labelled",
    target:
      "planned handover (leases.handover / pglease handover --to POD): the named pod labelled leader, p99",
    figure: "rollout.handover[system=pglease].toLabelled.p99Ms",
    unit: "ms",
    op: "<",
    threshold: 100,
    note: "from the call, without the CLI's process start; client-go has no planned handover",
  },
  {
    id: "rollout-changes",
    target:
      "rolling update of the chart's Deployment (3 replicas): leadership changes per rollout, the most in any rollout",
    figure: "rollout.rollouts[system=pglease].changes.max",
    unit: "per rollout",
    op: "==",
    threshold: 1,
    note: "the leader's pod deleted first, the order that moves leadership most; client-go with ReleaseOnCancel is beside it in the rollout table",
  },
  {
    id: "cluster-delete-leaderless",
    target:
      "real cluster, `kubectl delete` of the leader pod: the leader Service without a ready endpoint, p99",
    figure: `${CLUSTER_DELETE}.leaderless.p99Ms`,
    unit: "ms",
    op: "<",
    threshold: 100,
    note: "the chart's defaults, 3 replicas, a few trials (p99 is the largest): after the claim, four API writes in turn (the quorum list, the peers' demotion, the own label, the EndpointSlice); the client-go labeller is beside it in the real-cluster table",
  },
  {
    id: "cluster-delete-no-overlap",
    target:
      "real cluster, `kubectl delete` of the leader pod: the leader Service with two ready endpoints, longest",
    figure: `${CLUSTER_DELETE}.twoReadyMaxMs`,
    unit: "ms",
    op: "==",
    threshold: 0,
  },
  {
    id: "cluster-rollout-no-overlap",
    target: "real cluster, `kubectl rollout restart`: the leader Service with two ready endpoints, longest",
    figure: "real-cluster.series[system=pglease][scenario=rollout].twoReadyMaxMs",
    unit: "ms",
    op: "==",
    threshold: 0,
  },
];

function holds(measured: number | boolean, op: TargetSpec["op"], threshold: number | boolean): boolean {
  if (typeof measured === "boolean" || typeof threshold === "boolean") return measured === threshold;
  if (op === "<") return measured < threshold;
  if (op === "<=") return measured <= threshold;
  return measured === threshold;
}

export function evaluateTarget(spec: TargetSpec, groups: Record<string, unknown>): TargetVerdict {
  const value = figureAt(groups, spec.figure);
  const measured =
    typeof value === "boolean" || (typeof value === "number" && Number.isFinite(value)) ? value : null;
  const verdict: Verdict =
    measured === null ? "not measured" : holds(measured, spec.op, spec.threshold) ? "met" : "not met";
  return { ...spec, measured, verdict };
}

export function evaluateTargets(
  groups: Record<string, unknown>,
  specs: TargetSpec[] = TARGETS,
): TargetVerdict[] {
  return specs.map((spec) => evaluateTarget(spec, groups));
}

/** A figure with its unit: "13.9 ms", "22.8 per interval", "yes". */
export function figureText(value: number | boolean | null, unit: string): string {
  if (value === null) return "—";
  if (typeof value === "boolean") return value ? "yes" : "no";
  if (unit === "ms" && value === 0) return "0 ms";
  if (unit === "ms") return Math.abs(value) >= 1000 ? `${(value / 1000).toFixed(1)} s` : `${ms(value)} ms`;
  const number = Number.isInteger(value) || Math.abs(value) >= 100 ? count(value) : value.toFixed(1);
  return unit ? `${number} ${unit}` : number;
}

export function thresholdText(spec: TargetSpec): string {
  if (typeof spec.threshold === "boolean") return `= ${spec.threshold ? "yes" : "no"}`;
  const op = spec.op === "==" ? "=" : spec.op === "<=" ? "≤" : "<";
  return `${op} ${figureText(spec.threshold, spec.unit)}`;
}

export function targetsTable(verdicts: TargetVerdict[]): Table {
  return {
    title: "Targets",
    columns: ["target", "threshold", "measured", "verdict"],
    rows: verdicts.map((v) => [v.target, thresholdText(v), figureText(v.measured, v.unit), v.verdict]),
    notes: verdicts.filter((v) => v.note).map((v) => `${v.target}: ${v.note}`),
  };
}
