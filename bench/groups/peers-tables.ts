// The peers group's ratios and tables (its targets are in bench/targets.ts).
import type { Table } from "../group.ts";
import { pgleaseRenewMs, SYSTEMS, type SystemId } from "../peers/systems.ts";
import { count, mb, ms, ratioText } from "../report.ts";
import type { FailoverSeries, HandoverEvent, PeerFigures, Spread } from "./peers.ts";
import type { SteadyCost } from "./steady-cost.ts";

export interface SeriesRatio {
  comparison: string;
  /** How many times faster (or fewer) pglease's figure is than the reference's; below 1: slower (more). */
  factor: number;
  text: string;
}

function find(series: FailoverSeries[], system: SystemId, event: HandoverEvent): FailoverSeries | undefined {
  return series.find((s) => s.system === system && s.event === event);
}

/** "3.2× fewer" / "1.5× more": for counts, where smaller is better. */
function fewerText(factor: number): string {
  if (!Number.isFinite(factor) || factor <= 0) return "n/a";
  const [value, word] = factor >= 1 ? [factor, "fewer"] : [1 / factor, "more"];
  return `${value >= 10 ? value.toFixed(0) : value.toFixed(1)}× ${word}`;
}

export function ratiosOf(series: FailoverSeries[], steady: SteadyCost[]): SeriesRatio[] {
  const ratios: SeriesRatio[] = [];
  const add = (comparison: string, ours: number | undefined, theirs: number | undefined, counts = false) => {
    if (ours === undefined || theirs === undefined || ours <= 0) return;
    const factor = theirs / ours;
    ratios.push({ comparison, factor, text: counts ? fewerText(factor) : ratioText(factor) });
  };
  const pairs: Array<[HandoverEvent, SystemId, SystemId]> = [
    ["crash", "pglease", "client-go"],
    ["crash", "pglease", "advisory-lock"],
    ["graceful", "pglease", "client-go-release"],
    ["graceful", "pglease", "client-go"],
    ["graceful", "pglease", "advisory-lock"],
    ["graceful", "pglease-no-notify", "client-go-release"],
  ];
  for (const [event, ours, theirs] of pairs) {
    const a = find(series, ours, event);
    const b = find(series, theirs, event);
    const name = `${event}: ${a?.label ?? SYSTEMS[ours].label} vs ${b?.label ?? SYSTEMS[theirs].label}`;
    add(`${name}, new leader holds`, a?.holds.p50Ms, b?.holds.p50Ms);
    if (b?.published) add(`${name}, labelled vs Lease shows holder`, a?.published?.p50Ms, b.published.p50Ms);
  }
  const cost = (id: SystemId) => steady.find((s) => s.system === id);
  add(
    "steady state: API requests per pod-hour, pglease vs client-go Lease",
    cost("pglease")?.apiRequests?.perPodPerHour,
    cost("client-go")?.apiRequests?.perPodPerHour,
    true,
  );
  add(
    "steady state: database statements per pod-hour, pglease vs advisory lock",
    cost("pglease")?.statements?.perPodPerHour,
    cost("advisory-lock")?.statements?.perPodPerHour,
    true,
  );
  add(
    "steady state: database statements per follower pod-hour, pglease vs advisory lock",
    cost("pglease")?.statements?.perFollowerPerHour,
    cost("advisory-lock")?.statements?.perFollowerPerHour,
    true,
  );
  add(
    "steady state: database statements per follower pod-hour, pglease notices vs polling (--no-notify)",
    cost("pglease")?.statements?.perFollowerPerHour,
    cost("pglease-no-notify")?.statements?.perFollowerPerHour,
    true,
  );
  return ratios;
}

const pair = (s: Spread | null) => (s ? [ms(s.p50Ms), ms(s.p99Ms)] : ["—", "—"]);

function failoverTable(figures: PeerFigures): Table {
  const { timing } = figures;
  return {
    title: `Failover: leader stopped → new leader, ${timing.name}`,
    columns: [
      "stop",
      "system",
      "trials",
      "holds p50 ms",
      "holds p99 ms",
      "labelled / Lease p50 ms",
      "labelled / Lease p99 ms",
      "from expiry p50 ms",
      "from expiry p99 ms",
    ],
    rows: figures.series.map((s) => [
      s.event === "crash" ? "SIGKILL" : "SIGTERM",
      s.label,
      count(s.trials.length),
      ...pair(s.holds),
      ...pair(s.published),
      ...pair(s.expiryToClaim),
    ]),
    notes: [
      `${figures.candidatesPerElection} candidate processes per election; the leader is stopped at a uniformly random moment of a ${(pgleaseRenewMs(timing) / 1000).toFixed(1)} s window after things settle, then restarted.`,
      "holds: signal sent → the new leader holds (pglease: the claim's acquired_at and the advisory lock's take, on PostgreSQL's clock; client-go: its own acquired).",
      "labelled / Lease: → pglease's new leader pod labelled leader (the API server's arrival time of the PATCH) / the Lease names the new holder.",
      "from expiry: pglease after SIGKILL, the dead leader's expires_at → the new claim's acquired_at, both on the server.",
      "After SIGKILL nothing runs, so client-go's release setting does not matter there; without it a SIGTERM waits out the lease too.",
      "With n trials, p99 is the largest but at most one of them; the JSON has every trial.",
    ],
  };
}

function ratiosTable(figures: PeerFigures): Table {
  return {
    title: "pglease against the alternatives (medians; counts per pod-hour)",
    columns: ["comparison", "pglease"],
    rows: figures.ratios.map((r) => [r.comparison, r.text]),
    notes: [
      "Failover ratios compare medians of the table above; steady-state ratios the measured rates below.",
    ],
  };
}

function steadyTable(figures: PeerFigures): Table {
  const window = figures.steady[0]?.windowMs ?? 0;
  const orDash = (value: number | undefined, format: (v: number) => string) =>
    value === undefined ? "—" : format(value);
  return {
    title: `Steady state per pod per hour (3 pods, one leader, ${ms(window / 1000)} s window, ${figures.timing.name})`,
    columns: [
      "system",
      "DB statements/h",
      "per follower",
      "expected",
      "new DB connections/h",
      "API requests/h",
      "expected",
      "DB connections pinned / total",
      "RSS MB",
    ],
    rows: figures.steady.map((s) => [
      s.label,
      orDash(s.statements?.perPodPerHour, count),
      orDash(s.statements?.perFollowerPerHour, count),
      orDash(s.statements?.expectedPerPodPerHour, count),
      orDash(s.sessionsOpened?.perPodPerHour, count),
      orDash(s.apiRequests?.perPodPerHour, count),
      orDash(s.apiRequests?.expectedPerPodPerHour, count),
      s.connections
        ? `${s.connections.pinnedPerPod.toFixed(1)} / ${s.connections.totalPerPod.toFixed(1)}`
        : "—",
      orDash(s.rssMbPerPod ?? undefined, mb),
    ]),
    notes: [
      "Measured: counted in the window, × 1 h ÷ window ÷ pods. Statements and new connections: counted on the wire by a proxy in front of a database of the system's own.",
      "Per follower: the leader's fixed-period statements (pglease: renew every lease/3, a notice-connection ping and a candidates' announcement every lease; the advisory lock: none) taken out, the rest per follower.",
      "Expected, per pod: pglease's leader renews every lease/3; with notices its followers read once per observed expiry (every lease − renew/2 on average) and each pod pings its notice connection once per lease, without (--no-notify) followers read every retry; every pglease pod announces itself as a candidate once per lease; client-go's leader writes every retry and followers read every 1.6 retries on average (jitter 1.2); the advisory lock's followers try every retry.",
      "pglease's API traffic when quiet is one watch renewed every 30–60 min from its last resourceVersion (no re-read); a window shorter than that sees a renewal or none, so its scaled figure is coarse: the JSON has every request by kind.",
      "Pinned: pglease's LISTEN connection (pool connections go back to the pool after each statement); the advisory lock's own connection.",
      ...figures.steady
        .filter((s) => s.podsRunningAtEnd !== undefined && s.podsRunningAtEnd < s.pods)
        .map(
          (s) =>
            `${s.label}: ${s.pods - s.podsRunningAtEnd} of ${s.pods} pods exited during the window (lost the lease); RSS is the others'.`,
        ),
    ],
  };
}

/** Where a graceful handover's time goes on the Kubernetes side, from the same trials. */
function gracefulStepsTable(figures: PeerFigures): Table | null {
  const graceful = find(figures.series, "pglease", "graceful");
  if (!graceful?.demoted) return null;
  return {
    title: `Graceful handover, pglease, step by step (SIGTERM, notify on, ${figures.timing.name})`,
    columns: ["step", "p50 ms", "p99 ms"],
    rows: [
      [
        "SIGTERM → the stopping pod's demotion (its follower label, its own or the new leader's) reaches the API server",
        ...pair(graceful.demoted),
      ],
      ["SIGTERM → the API server answers it (the label stored)", ...pair(graceful.demotedAnswered)],
      ["SIGTERM → the follower holds the lease", ...pair(graceful.holds)],
      ["SIGTERM → the new leader's pod labelled leader", ...pair(graceful.published)],
    ],
    notes: [
      "Gap, never overlap (DESIGN §3, §4): the stopping pod ends its work, then releases and demotes its pod in parallel; the new leader lists its peers (a quorum read) and demotes any still labelled leader before it labels itself. The database steps are the lease-ops group's graceful handover table.",
      "Each row is its own distribution over the trials: the rows do not subtract.",
    ],
  };
}

export function peersTables(figures: PeerFigures): Table[] {
  const steps = gracefulStepsTable(figures);
  return [failoverTable(figures), ...(steps ? [steps] : []), ratiosTable(figures), steadyTable(figures)];
}
