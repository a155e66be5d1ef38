// What the demo measured, as a plain table with p50/max per kind of stop, or as JSON.
import { formatMs, type RoundResult, SIGNAL_OF, type StopKind } from "./rounds.ts";

export interface KindStats {
  count: number;
  p50Ms: number | null;
  maxMs: number | null;
}

export interface DemoReport {
  replicas: number;
  lease: string;
  leaseDurationMs: number;
  renewIntervalMs: number;
  retryIntervalMs: number;
  database: string;
  /** True when a signal ended the demo before the rounds it was asked for. */
  interrupted: boolean;
  rounds: RoundResult[];
  /** Every process the demo started, all stopped before this report was written. */
  processes: {
    postgres: { pid: number | undefined; dir: string } | null;
    replicas: Array<{ name: string; pid: number }>;
  };
}

const KINDS: readonly StopKind[] = ["graceful", "kill"];

/** Nearest-rank percentile: always one of the measured values. */
export function percentile(values: readonly number[], p: number): number | null {
  if (values.length === 0) return null;
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.max(0, Math.ceil((p / 100) * sorted.length) - 1)] ?? null;
}

export function statsByKind(rounds: readonly RoundResult[]): Record<StopKind, KindStats> {
  const entry = (kind: StopKind): KindStats => {
    const values = rounds.filter((r) => r.kind === kind).map((r) => r.failoverMs);
    return {
      count: values.length,
      p50Ms: percentile(values, 50),
      maxMs: values.length === 0 ? null : Math.max(...values),
    };
  };
  return { graceful: entry("graceful"), kill: entry("kill") };
}

export function statsLine(kind: StopKind, stats: KindStats): string {
  const label = `${kind} (${SIGNAL_OF[kind]})`.padEnd(18);
  if (stats.count === 0 || stats.p50Ms === null || stats.maxMs === null) return `${label} no rounds`;
  return `${label} p50 ${formatMs(stats.p50Ms)}, max ${formatMs(stats.maxMs)} over ${stats.count} round${stats.count === 1 ? "" : "s"}`;
}

export function roundLine(r: RoundResult): string {
  return [
    `#${r.round}`.padEnd(4),
    r.kind.padEnd(9),
    `${r.stopped} → ${r.newLeader}`.padEnd(25),
    `fence ${r.oldFence} → ${r.newFence}`.padEnd(16),
    formatMs(r.failoverMs).padStart(9),
  ].join(" ");
}

export function summaryText(report: DemoReport): string {
  const stats = statsByKind(report.rounds);
  const p = report.processes;
  const lines = [
    "",
    `pglease demo: ${report.rounds.length} round${report.rounds.length === 1 ? "" : "s"}${report.interrupted ? " (interrupted)" : ""}, ` +
      `${report.replicas} replicas on lease "${report.lease}", duration ${report.leaseDurationMs} ms, ` +
      `renew ${report.renewIntervalMs} ms, retry ${report.retryIntervalMs} ms; ${report.database}`,
    "",
    "round kind      stopped → new leader     fences           failover",
    ...report.rounds.map(roundLine),
    "",
    ...KINDS.map((kind) => statsLine(kind, stats[kind])),
    "",
    `stopped: ${p.replicas.map((r) => `${r.name} pid ${r.pid}`).join(", ")}` +
      (p.postgres ? `; PostgreSQL pid ${p.postgres.pid ?? "?"}, folder ${p.postgres.dir} removed` : ""),
    "",
  ];
  return lines.join("\n");
}

export function summaryJson(report: DemoReport): string {
  return `${JSON.stringify({ ...report, stats: statsByKind(report.rounds) }, null, 2)}\n`;
}
