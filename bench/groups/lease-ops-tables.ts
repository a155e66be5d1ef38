// What the lease-ops group reports: its figures, the comparisons it draws, and its two tables.

import type { Table } from "../group.ts";
import type { LatencyStats } from "../measure.ts";
import { count, ms, type Ratio, ratio } from "../report.ts";
import type { HandoverSteps } from "./handover-steps.ts";
import type { HistoryCostFigures } from "./history-cost.ts";

export type Statements = "named" | "unnamed" | "named, pinned connection";

export const OPERATION_LABELS: Record<string, string> = {
  claim: "claim (free lease)",
  release: "release",
  renew: "renew",
  read: "read (held lease)",
  "failed claim": "claim (held: fails)",
  "try-lock": "pg_try_advisory_lock",
  unlock: "pg_advisory_unlock",
  "failed try-lock": "pg_try_advisory_lock (held: fails)",
};

export interface OperationFigure {
  setup: string;
  connections: number;
  concurrency: number;
  /** False in the diagnostic setup (synchronous_commit=off): write latency without the WAL flush. */
  commitFlushed: boolean;
  /** claim, release, renew, read, failed claim, try-lock, unlock, failed try-lock */
  operation: string;
  statements: Statements;
  latency: LatencyStats;
}

export type LeaseOpsRatio = Ratio & { setup: string; byMean: number };

export interface LeaseOpsFigures {
  operations: OperationFigure[];
  /** WAL written per statement, measured sequentially on one connection (named statements). */
  walBytesPerOp: Record<string, number>;
  /** factor and text compare median latencies; byMean compares means (that is, ops/s). */
  ratios: LeaseOpsRatio[];
  /** The same statements with and without the history triggers. */
  history: HistoryCostFigures;
  /** A graceful handover's database steps (handover-steps.ts). */
  handover: HandoverSteps;
}

const COMPARISONS: Array<{ name: string; subject: [string, Statements]; reference: [string, Statements] }> = [
  ...["claim", "release", "renew", "read", "failed claim"].map((operation) => ({
    name: `named vs unnamed: ${OPERATION_LABELS[operation]}`,
    subject: [operation, "named"] as [string, Statements],
    reference: [operation, "unnamed"] as [string, Statements],
  })),
  {
    name: "read vs failed claim (held lease)",
    subject: ["read", "named"],
    reference: ["failed claim", "named"],
  },
  {
    name: "advisory try-lock vs claim",
    subject: ["try-lock", "named, pinned connection"],
    reference: ["claim", "named"],
  },
  {
    name: "advisory unlock vs release",
    subject: ["unlock", "named, pinned connection"],
    reference: ["release", "named"],
  },
  {
    name: "failed try-lock vs failed claim",
    subject: ["failed try-lock", "named, pinned connection"],
    reference: ["failed claim", "named"],
  },
];

export function ratiosOf(figures: OperationFigure[], setups: string[]): LeaseOpsRatio[] {
  return setups.flatMap((setup) =>
    COMPARISONS.flatMap(({ name, subject, reference }) => {
      const find = ([operation, statements]: [string, Statements]) =>
        figures.find((f) => f.setup === setup && f.operation === operation && f.statements === statements);
      const [a, b] = [find(subject), find(reference)];
      if (!a || !b) return [];
      // Medians: on a small shared host the means carry other processes' pauses; both are kept.
      const byMedian = ratio(name, reference.join(" "), 1 / a.latency.p50Ms, 1 / b.latency.p50Ms);
      return [{ ...byMedian, byMean: b.latency.meanMs / a.latency.meanMs, setup }];
    }),
  );
}

export function leaseOpsTables(figures: LeaseOpsFigures, setups: string[]): Table[] {
  const latency: Table = {
    title: "Lease statements: latency and throughput",
    columns: [
      "setup",
      "operation",
      "statements",
      "p50 ms",
      "p99 ms",
      "mean ms",
      "ops/s",
      "samples",
      "WAL B/op",
    ],
    rows: figures.operations.map((f) => [
      f.setup,
      OPERATION_LABELS[f.operation] ?? f.operation,
      f.statements,
      ms(f.latency.p50Ms),
      ms(f.latency.p99Ms),
      ms(f.latency.meanMs),
      count(f.latency.opsPerSec),
      count(f.latency.samples),
      count(figures.walBytesPerOp[f.operation] ?? Number.NaN),
    ]),
    notes: [
      "ops/s = concurrency ÷ mean latency (Little's law): the rate of a loop doing only that statement.",
      "claim (free lease) and release alternate on one key per caller; every caller has keys of its own.",
      "WAL B/op: bytes of write-ahead log per statement, measured once, sequentially, on one connection.",
      "no flush wait (diagnostic): synchronous_commit=off, writes skip the WAL flush: the statements' own cost.",
      "That setup only shows what the disk's fsync hides; lease statements must never run that way.",
    ],
  };
  const comparison: Table = {
    title: "Lease statements: ratios (median latency of the second over the first)",
    columns: ["comparison", ...setups],
    rows: COMPARISONS.map(({ name }) => [
      name,
      ...setups.map(
        (setup) => figures.ratios.find((r) => r.subject === name && r.setup === setup)?.text ?? "n/a",
      ),
    ]),
    notes: [
      "Medians, because on a small shared host the means carry other processes' pauses; the JSON has both.",
      "Advisory locks run on pinned connections (one per pool slot) with named statements, like ours.",
    ],
  };
  return [latency, comparison];
}
