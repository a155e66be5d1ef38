// The chaos run's summary: a table for people, the same figures as JSON for machines.
import type { ChaosOptions, ChaosOutcome } from "./chaos-run.ts";
import { renewIntervalOf } from "./chaos-run.ts";
import type { InjectedFault } from "./history.ts";
import { batchedStatements } from "./lease-rules.ts";
import { CRASH_FAULT_KINDS, FAILOVER_FAULT_KINDS, FAULT_KINDS, SESSION_FAULT_KINDS } from "./schedule.ts";

export interface KindSummary {
  kind: string;
  slots: number;
  /** Faults of this kind injected, alone or in a pair; a pair counts here once per slot. */
  injected: number;
  /** Faults of this kind whose target was down or missing (a kill a moment before, no row yet…). */
  skipped: number;
  /** Slots in which, for a while, no running process both believed it led and was labelled. */
  disrupted: number;
  failoverMs: { p50: number | null; p99: number | null; max: number | null };
  recoveryMs: { p50: number | null; p99: number | null; max: number | null };
}

export interface Summary {
  seed: string;
  replicas: number;
  guarded: boolean;
  leaseMs: number;
  renewMs: number;
  retryMs: number;
  faultPhaseMs: number;
  elapsedMs: number;
  faults: KindSummary[];
  faultsInjected: number;
  faultsSkipped: number;
  writes: { accepted: number; rejected: number; byReplica: Record<string, number> };
  acquisitions: number;
  highestFence: number;
  staleWakeups: ChaosOutcome["result"]["staleWakeups"];
  longestWriteGapMs: number;
  bounds: ChaosOutcome["result"]["bounds"];
  violations: ChaosOutcome["result"]["violations"];
  notes: string[];
  writeErrors: Record<string, number>;
  setup: ChaosOutcome["setup"];
  warnings: ChaosOutcome["warnings"];
  /** Statements that renewed or released several leases of one holder (the extra leases), from the change log. */
  batched: { renewMany: number; releaseMany: number; leases: string[] };
  /** Under --session-takeover: recorded sessions seen ending, and terms the server took over for it. */
  sessions?: { ended: number; takenOver: number };
}

/** Nearest-rank percentile. */
export function percentile(values: readonly number[], p: number): number | null {
  if (values.length === 0) return null;
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1))] ?? null;
}

const spread = (values: number[]) => ({
  p50: percentile(values, 50),
  p99: percentile(values, 99),
  max: values.length ? Math.max(...values) : null,
});

export function summarize(options: ChaosOptions, outcome: ChaosOutcome): Summary {
  const { history, result } = outcome;
  const injected = history.slots.flatMap((s) => s.faults);
  const skippedFault = (f: InjectedFault) => f.detail.startsWith("skipped");
  const faults = [...FAULT_KINDS, ...FAILOVER_FAULT_KINDS, ...SESSION_FAULT_KINDS, ...CRASH_FAULT_KINDS].map(
    (kind): KindSummary => {
      const slots = result.slots.filter((s) => s.kind === kind);
      const ofKind = kind === "two-at-once" ? [] : injected.filter((f) => f.kind === kind);
      const failovers = slots.flatMap((s) => (s.failoverMs === null ? [] : [s.failoverMs]));
      const recoveries = slots.flatMap((s) => (s.recoveryMs === null ? [] : [s.recoveryMs]));
      return {
        kind,
        slots: slots.length,
        injected: kind === "two-at-once" ? slots.length : ofKind.filter((f) => !skippedFault(f)).length,
        skipped: ofKind.filter(skippedFault).length,
        disrupted: failovers.length,
        failoverMs: spread(failovers),
        recoveryMs: spread(recoveries),
      };
    },
  );
  const byReplica: Record<string, number> = {};
  for (const w of history.writes) byReplica[w.replica] = (byReplica[w.replica] ?? 0) + 1;
  const acquisitions = history.transitions.filter(
    (t) =>
      t.outcome === "acquired" && t.time <= history.window.to && (t.key ?? history.lease) === history.lease,
  );
  return {
    seed: options.seed,
    replicas: options.replicas,
    guarded: options.guarded,
    leaseMs: options.leaseMs,
    renewMs: renewIntervalOf(options.leaseMs),
    retryMs: options.retryMs,
    faultPhaseMs: history.window.to - history.window.from,
    elapsedMs: outcome.elapsedMs,
    faults,
    faultsInjected: injected.filter((f) => !skippedFault(f)).length,
    faultsSkipped: injected.filter(skippedFault).length,
    writes: { accepted: result.writesAccepted, rejected: result.writesRejected, byReplica },
    acquisitions: acquisitions.length,
    highestFence: Math.max(0, ...history.leaseRows.map((r) => r.fence)),
    staleWakeups: result.staleWakeups,
    longestWriteGapMs: result.longestWriteGapMs,
    bounds: result.bounds,
    violations: result.violations,
    notes: outcome.notes,
    writeErrors: outcome.writeErrors,
    setup: outcome.setup,
    warnings: outcome.warnings,
    batched: { ...batchedStatements(history), leases: history.extraLeases ?? [] },
    ...(history.sessionEnds
      ? {
          sessions: {
            ended: history.sessionEnds.length,
            takenOver: history.leaseRows.filter((r) => r.tookGoneSession).length,
          },
        }
      : {}),
  };
}

const seconds = (ms: number | null) => (ms === null ? "-" : `${(ms / 1000).toFixed(2)} s`);

function table(rows: string[][]): string {
  const widths = rows[0]?.map((_, i) => Math.max(...rows.map((r) => (r[i] ?? "").length))) ?? [];
  return rows
    .map((r) =>
      r.map((cell, i) => (i === 0 ? cell.padEnd(widths[i] ?? 0) : cell.padStart(widths[i] ?? 0))).join("  "),
    )
    .join("\n");
}

export function formatSummary(s: Summary): string {
  const header = `pglease chaos run: seed ${JSON.stringify(s.seed)}, ${s.replicas} replicas, ${(s.faultPhaseMs / 1000).toFixed(0)} s of faults (${(s.elapsedMs / 1000).toFixed(0)} s in all), lease ${s.leaseMs} ms, renew ${s.renewMs} ms, retry ${s.retryMs} ms, writes ${s.guarded ? "through the fence guard" : "WITHOUT the fence guard (unsafe variant)"}`;
  const rows = [
    [
      "fault",
      "slots",
      "injected",
      "skipped",
      "disrupted",
      "failover p50",
      "failover p99",
      "recovery p50",
      "recovery p99",
      "recovery max",
    ],
    ...s.faults
      .filter((f) => f.slots > 0 || f.injected > 0 || f.skipped > 0)
      .map((f) => [
        f.kind,
        String(f.slots),
        String(f.injected),
        String(f.skipped),
        String(f.disrupted),
        seconds(f.failoverMs.p50),
        seconds(f.failoverMs.p99),
        seconds(f.recoveryMs.p50),
        seconds(f.recoveryMs.p99),
        seconds(f.recoveryMs.max),
      ]),
  ];
  const lines = [
    header,
    `on ${s.setup.database}; ${s.setup.apiServer}`,
    "",
    table(rows),
    "",
    "slots: the kind alone; injected: alone or in a pair (two-at-once: its slots); failover: from the first instant with no running, labelled leader to the next one with; recovery: from the heal to a running, labelled leader (bound: lease + 1 s)",
    `faults injected: ${s.faultsInjected}${s.faultsSkipped ? ` (${s.faultsSkipped} skipped: target down or missing)` : ""}; acquisitions: ${s.acquisitions}; highest fence: ${s.highestFence}`,
    `writes accepted: ${s.writes.accepted} (${Object.entries(s.writes.byReplica)
      .map(([r, n]) => `${r} ${n}`)
      .join(", ")}); rejected by the guard as stale: ${s.writes.rejected}`,
    `stale beliefs after a pause (woken leader, someone else leading), longest before stepping down: ${Object.entries(
      s.staleWakeups,
    )
      .map(([kind, w]) => `${kind} ${w.count}× ≤ ${w.maxMs} ms`)
      .join(", ")} (grace ${s.bounds.wakeGraceMs} ms)`,
    `longest a leader with a healthy database link went without an accepted write: ${s.longestWriteGapMs} ms (bound ${s.bounds.quietBoundMs} ms)`,
    `extra leases ${s.batched.leases.join(", ") || "none"}, judged like the primary (fences, terms, beliefs): ${s.batched.renewMany} renewMany and ${s.batched.releaseMany} releaseMany statements of several leases committed`,
    `bounds: overlaps up to ${s.bounds.toleranceMs} ms are log-time rounding; a labelled leader within ${s.bounds.livenessBoundMs} ms of each heal; a holder whose term the server ended behind its back may believe ${s.bounds.serverEndGraceMs} ms longer (until its local deadline, its last renewed expiry − ${s.bounds.safetyMarginMs} ms, once a renew of its got no answer; never past it); a pod whose application is unready may stay labelled leader ${s.bounds.unreadyLeaderBoundMs} ms while another's is ready`,
    ...(s.sessions
      ? [
          `session takeover: ${s.sessions.ended} recorded sessions seen ending while the server ran, ${s.sessions.takenOver} live terms taken over for it; a holder whose session ended may believe ${s.bounds.sessionEndGraceMs} ms after the end (renew interval + call timeout)`,
        ]
      : []),
    `violations: ${s.violations.length}`,
    ...s.violations.slice(0, 30).map((v) => `  - ${v.rule} at ${new Date(v.at).toISOString()}: ${v.detail}`),
    ...(s.violations.length > 30 ? [`  … and ${s.violations.length - 30} more (see --json)`] : []),
    ...(s.notes.length ? ["notes:", ...s.notes.map((n) => `  - ${n}`)] : []),
    ...(s.warnings.length
      ? ["sidecar warnings:", ...s.warnings.map((w) => `  - (${w.replicas.join(", ")}) ${w.message}`)]
      : []),
  ];
  return lines.join("\n");
}
