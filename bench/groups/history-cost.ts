// What the history costs: the same lease statements on two tables, one with the history triggers
// and one without them, in one run, in alternating rounds on one connection. A change of hands is
// a claim of a free lease and its release (two history entries); a renew must write no history.
import type pg from "pg";
import { migrate } from "../../src/postgres/migrate.ts";
import { createLeasePool } from "../../src/postgres/pool.ts";
import { PgLeaseStore } from "../../src/postgres/store.ts";
import { leaseTable } from "../../src/postgres/table.ts";
import type { BenchContext, Table } from "../group.ts";
import { type LatencyStats, latencyStats, type Steps, timeSteps } from "../measure.ts";
import { count, ms, ratioText } from "../report.ts";
import { walBytesPerRun } from "./lease-wal.ts";
import * as work from "./lease-workloads.ts";

const TABLES = { with: "bench_history_on", without: "bench_history_off" } as const;
const ROUNDS = 6;
const OPERATIONS = ["claim", "release", "renew"] as const;

type Variant = keyof typeof TABLES;
type Operation = (typeof OPERATIONS)[number];

export interface HistoryCostFigures {
  latency: Record<Variant, Record<Operation, LatencyStats>>;
  /** Diagnostic, synchronous_commit=off: the statements' own cost, without the WAL flush that hides it. */
  latencyNoFlush: Record<Variant, Record<Operation, LatencyStats>>;
  walBytes: Record<Variant, Record<Operation | "change of hands", number>>;
  /** History entries written by the timed renewals of the table with history: must be 0. */
  historyRowsFromRenewals: number;
}

async function prepare(pool: pg.Pool): Promise<void> {
  for (const table of Object.values(TABLES)) await migrate(pool, leaseTable("public", table));
  for (const trigger of [
    "pglease_history_insert",
    "pglease_history_update",
    "pglease_history_delete",
    "pglease_history_ended",
  ]) {
    await pool.query(`DROP TRIGGER IF EXISTS ${trigger} ON public.${TABLES.without}`);
  }
}

async function timeLatency(
  context: BenchContext,
  pool: pg.Pool,
  statementTimeoutMs: number,
  label: string,
): Promise<HistoryCostFigures["latency"]> {
  const { budget, signal } = context;
  const stores = {
    with: new PgLeaseStore({ pool, table: TABLES.with, statementTimeoutMs }),
    without: new PgLeaseStore({ pool, table: TABLES.without, statementTimeoutMs }),
  };
  const renewFences = {
    with: await work.hold(stores.with, `history-renew-${label}`, work.HOLDER),
    without: await work.hold(stores.without, `history-renew-${label}`, work.HOLDER),
  };
  const samples = new Map<string, number[]>();
  // A few iterations per round at least: the smoke test's tiny budget runs two rounds, not six.
  const rounds = Math.max(1, Math.min(ROUNDS, Math.floor(budget.iterations / 4)));
  for (let round = 0; round < rounds; round++) {
    context.progress(`lease-ops: history cost (${label}), round ${round + 1}/${rounds}`);
    for (const variant of ["with", "without"] as const) {
      const store = stores[variant];
      const loops: Steps[] = [
        work.claimReleaseCycle(store, `history-cycle-${label}`),
        work.renewLoop(store, `history-renew-${label}`, renewFences[variant]),
      ];
      for (const steps of loops) {
        const sampling = {
          warmup: round === 0 ? budget.warmup : 0,
          warmupMaxMs: budget.maxMsPerFigure / 4,
          iterations: Math.ceil(budget.iterations / rounds),
          maxMs: budget.maxMsPerFigure / rounds,
        };
        for (const [operation, taken] of await timeSteps(1, sampling, signal, () => steps)) {
          const id = `${variant}/${operation}`;
          samples.set(id, [...(samples.get(id) ?? []), ...taken]);
        }
      }
    }
  }
  const stats = (variant: Variant) =>
    Object.fromEntries(
      OPERATIONS.map((op) => [op, latencyStats(samples.get(`${variant}/${op}`) ?? [], 1)]),
    ) as Record<Operation, LatencyStats>;
  return { with: stats("with"), without: stats("without") };
}

async function measureWalBytes(
  context: BenchContext,
  probe: pg.Client,
  stores: Record<Variant, PgLeaseStore>,
  renewFences: Record<Variant, number>,
): Promise<HistoryCostFigures["walBytes"]> {
  const runs = Math.max(1, Math.min(200, Math.ceil(context.budget.iterations / 4)));
  const maxMs = context.budget.maxMsPerFigure / 8;
  const bytes = async (variant: Variant) => {
    const cycle = work.claimReleaseCycle(stores[variant], "history-wal");
    const [claim, release] = [work.stepOf(cycle, "claim"), work.stepOf(cycle, "release")];
    const renew = work.nth(work.renewLoop(stores[variant], "history-renew", renewFences[variant]), 0)[1];
    const figures = {
      claim: await walBytesPerRun(probe, runs, maxMs, claim, { after: release }),
      release: await walBytesPerRun(probe, runs, maxMs, release, { before: claim }),
      renew: await walBytesPerRun(probe, runs, maxMs, renew),
    };
    return { ...figures, "change of hands": figures.claim + figures.release };
  };
  return { with: await bytes("with"), without: await bytes("without") };
}

export async function measureHistoryCost(
  context: BenchContext,
  statementTimeoutMs: number,
): Promise<HistoryCostFigures> {
  const pool = createLeasePool({
    connectionString: context.databaseUrl,
    max: 1,
    applicationName: "pglease-bench",
  });
  const noFlushUrl = new URL(context.databaseUrl);
  noFlushUrl.searchParams.set("options", "-c synchronous_commit=off");
  const noFlush = createLeasePool({
    connectionString: noFlushUrl.toString(),
    max: 1,
    applicationName: "pglease-bench",
  });
  const probe = await work.connect(context.databaseUrl);
  try {
    await prepare(pool);
    const stores = {
      with: new PgLeaseStore({ pool, table: TABLES.with, statementTimeoutMs }),
      without: new PgLeaseStore({ pool, table: TABLES.without, statementTimeoutMs }),
    };
    const renewFences = {
      with: await work.hold(stores.with, "history-renew", work.HOLDER),
      without: await work.hold(stores.without, "history-renew", work.HOLDER),
    };
    const latency = await timeLatency(context, pool, statementTimeoutMs, "flushed");
    const latencyNoFlush = await timeLatency(context, noFlush, statementTimeoutMs, "no flush wait");
    const walBytes = await measureWalBytes(context, probe, stores, renewFences);
    const historyRowsFromRenewals = await renewEntries(pool);
    return { latency, latencyNoFlush, walBytes, historyRowsFromRenewals };
  } finally {
    await pool.end();
    await noFlush.end();
    await probe.end();
  }
}

/** Entries of the renewed keys beyond the one claim each was held by: what renewals wrote. */
async function renewEntries(pool: pg.Pool): Promise<number> {
  const { rows } = await pool.query<{ n: number }>(
    `SELECT (count(*) - count(DISTINCT key))::int AS n FROM public.${TABLES.with}_history
      WHERE key LIKE 'history-renew%'`,
  );
  return rows[0]?.n ?? -1;
}

export function historyCostTable(figures: HistoryCostFigures): Table {
  const row = (op: Operation) => {
    const p50 = (figures: HistoryCostFigures["latency"], variant: Variant) => figures[variant][op].p50Ms;
    return [
      op,
      ms(p50(figures.latency, "without")),
      ms(p50(figures.latency, "with")),
      ms(p50(figures.latencyNoFlush, "without")),
      ms(p50(figures.latencyNoFlush, "with")),
      ratioText(p50(figures.latencyNoFlush, "without") / p50(figures.latencyNoFlush, "with")),
      count(figures.walBytes.without[op]),
      count(figures.walBytes.with[op]),
    ];
  };
  const hands = ["change of hands (claim + release)", "", "", "", "", "", "", ""];
  hands[6] = count(figures.walBytes.without["change of hands"]);
  hands[7] = count(figures.walBytes.with["change of hands"]);
  return {
    title: "History: cost per statement, without and with the history triggers",
    columns: [
      "statement",
      "p50 ms without",
      "p50 ms with",
      "no flush: without",
      "no flush: with",
      "with history (no flush)",
      "WAL B without",
      "WAL B with",
    ],
    rows: [...OPERATIONS.map(row), hands],
    notes: [
      "One connection, named statements, alternating rounds on two tables: one with the triggers, one without.",
      "no flush (diagnostic): synchronous_commit=off, so the fsync that dominates a write does not hide the triggers' own cost.",
      `History entries written by the timed renewals: ${figures.historyRowsFromRenewals} (must be 0).`,
      "WAL: bytes per statement, measured sequentially; the position is server-wide, so other writers add noise.",
    ],
  };
}
