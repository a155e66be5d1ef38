// Figure group "scale": one process holding 1 … 10,000 leases. Each renew tick renews all of
// them, either as one renewMany statement or as one renew statement per lease sent through the
// shared pool of 4 at once (what one elector per lease does); plus the process's CPU and memory.

import type pg from "pg";
import { migrate } from "../../src/postgres/migrate.ts";
import { createLeasePool } from "../../src/postgres/pool.ts";
import { PgLeaseStore } from "../../src/postgres/store.ts";
import { leaseTable } from "../../src/postgres/table.ts";
import type { BenchContext, FigureGroup, GroupResult, Table } from "../group.ts";
import {
  cpuMsDuring,
  type LatencyStats,
  latencyStats,
  type MemoryFigures,
  memoryNow,
  timeRepeated,
} from "../measure.ts";
import { watchStatements } from "../pool-statements.ts";
import { count, mb, ms, type Ratio, ratio } from "../report.ts";
import { HOLDER, LEASE_MS } from "./lease-workloads.ts";
import { type ElectorScaleFigure, electorsTable, measureElectors } from "./scale-electors.ts";

const TABLE = "bench_scale";
const POOL_SIZE = 4;
/** The default renew interval (lease 15 s ÷ 3) that turns CPU per tick into CPU per second. */
export const DEFAULT_RENEW_INTERVAL_MS = 5_000;

export interface TickFigures {
  ticks: number;
  tick: LatencyStats;
  statementsPerTick: number;
  /** This process's CPU (user + system) per tick; the server's is not included. */
  cpuMsPerTick: number;
  cpuMsPerSecondAtDefaultRenew: number;
}

export interface ScaleFigure {
  leases: number;
  batched: TickFigures;
  oneEach: TickFigures;
  /** Ticks per second of renewMany over one statement each. */
  ratio: Ratio;
  memory: MemoryFigures & { heapGrowthMb: number };
}

export interface ScaleFigures {
  poolSize: number;
  defaultRenewIntervalMs: number;
  sizes: ScaleFigure[];
  /** The library's own path: openLeases campaigning for that many leases, batched renewals. */
  electors: ElectorScaleFigure[];
}

/** Counts the statements sent through a pool, so "one statement per tick" is measured, not assumed. */
function countStatements(pool: pg.Pool): { sent: number } {
  const counter = { sent: 0 };
  watchStatements(pool, () => {
    counter.sent++;
  });
  return counter;
}

type Term = { key: string; fence: number };

// Setup only: the rows that many claims by one holder leave behind (fence 1), written in one
// statement so that the setup does not dominate the run; the claims themselves are timed in lease-ops.
const HOLD_MANY = (qualified: string) => `
  INSERT INTO ${qualified} (key, holder, fence, acquired_at, expires_at)
  SELECT $1 || i, $2, 1, now(), now() + $3 * interval '1 millisecond' FROM generate_series(0, $4 - 1) AS i`;

async function holdAll(pool: pg.Pool, qualified: string, leases: number): Promise<Term[]> {
  const prefix = `scale-${leases}-`;
  await pool.query(HOLD_MANY(qualified), [prefix, HOLDER, LEASE_MS, leases]);
  // Statistics as autovacuum leaves them once the process has held these leases a while. Without
  // them the named renewMany statement can switch to a generic plan that scans the table per key
  // (seen here: 10,000 leases in 64 s, 1,000 ten times slower): the steady state is measured.
  await pool.query(`ANALYZE ${qualified}`);
  return Array.from({ length: leases }, (_, i) => ({ key: `${prefix}${i}`, fence: 1 }));
}

async function measureTicks(
  context: BenchContext,
  counter: { sent: number },
  ticks: number,
  tick: () => Promise<void>,
): Promise<TickFigures> {
  counter.sent = 0;
  let durations: number[] = [];
  const cpuMs = await cpuMsDuring(async () => {
    durations = await timeRepeated(ticks, context.budget.maxMsPerFigure, context.signal, tick);
  });
  if (durations.length === 0) throw new Error("no renew tick finished within the time budget");
  const cpuMsPerTick = cpuMs / durations.length;
  return {
    ticks: durations.length,
    tick: latencyStats(durations, 1),
    statementsPerTick: counter.sent / durations.length,
    cpuMsPerTick,
    cpuMsPerSecondAtDefaultRenew: cpuMsPerTick / (DEFAULT_RENEW_INTERVAL_MS / 1000),
  };
}

async function measureSize(
  context: BenchContext,
  pool: pg.Pool,
  store: PgLeaseStore,
  counter: { sent: number },
  leases: number,
  baselineHeapMb: number,
): Promise<ScaleFigure> {
  context.progress(`scale: holding ${count(leases)} leases`);
  const terms = await holdAll(pool, store.table.qualified, leases);
  const batchedTick = async () => {
    const renewed = await store.renewMany(HOLDER, terms, LEASE_MS);
    if (renewed.size !== leases)
      throw new Error(`bench workload broken: renewMany renewed ${renewed.size}/${leases}`);
  };
  const oneEachTick = async () => {
    let next = 0;
    // As many renews in flight as the pool has connections: more only queue in the pool, and
    // 10,000 queued at once outlast its 5 s checkout timeout on a slow disk.
    const drain = async () => {
      for (let term = terms[next++]; term; term = terms[next++]) {
        const answer = await store.renew(term.key, HOLDER, term.fence, LEASE_MS);
        if (!answer.renewed) throw new Error(`bench workload broken: renew of ${term.key} lost`);
      }
    };
    await Promise.all(Array.from({ length: POOL_SIZE }, drain));
  };
  // Warm-up: statements prepared on every pooled connection, plan cached, pages in memory.
  await batchedTick();
  await Promise.all(terms.slice(0, 100).map((t) => store.renew(t.key, HOLDER, t.fence, LEASE_MS)));

  const batched = await measureTicks(context, counter, context.budget.batchedTicks, batchedTick);
  const oneEach = await measureTicks(context, counter, context.budget.oneEachTicks, oneEachTick);
  const memory = memoryNow();
  return {
    leases,
    batched,
    oneEach,
    ratio: ratio("renewMany", "one renew each", 1 / batched.tick.meanMs, 1 / oneEach.tick.meanMs),
    memory: { ...memory, heapGrowthMb: memory.heapUsedMb - baselineHeapMb },
  };
}

function scaleTable(figures: ScaleFigures): Table {
  const pair = (a: string, b: string) => `${a} / ${b}`;
  return {
    title: `Renewing every lease one process holds, per tick (pool of ${figures.poolSize})`,
    columns: [
      "leases",
      "renewMany ms/tick",
      "one each ms/tick",
      "renewMany vs one each",
      "statements/tick",
      "CPU ms/tick",
      "CPU ms/s @5 s renew",
      "RSS MB",
      "heap MB",
    ],
    rows: figures.sizes.map((f) => [
      count(f.leases),
      ms(f.batched.tick.meanMs),
      ms(f.oneEach.tick.meanMs),
      f.ratio.text,
      pair(count(f.batched.statementsPerTick), count(f.oneEach.statementsPerTick)),
      pair(ms(f.batched.cpuMsPerTick), ms(f.oneEach.cpuMsPerTick)),
      pair(ms(f.batched.cpuMsPerSecondAtDefaultRenew), ms(f.oneEach.cpuMsPerSecondAtDefaultRenew)),
      mb(f.memory.rssMb),
      mb(f.memory.heapUsedMb),
    ]),
    notes: [
      "Pairs read renewMany / one each. ms/tick is the mean wall time of a tick renewing every lease.",
      `One each: one renew statement per lease, ${POOL_SIZE} in flight at a time on the shared pool of ${POOL_SIZE}.`,
      "CPU is this process's (user + system), not the server's; per second at the default 5 s renew interval.",
      "RSS is the whole bench process's (earlier groups' high-water mark included); heap is after a full GC.",
    ],
  };
}

export async function runScale(context: BenchContext): Promise<GroupResult<ScaleFigures>> {
  const pool = createLeasePool({
    connectionString: context.databaseUrl,
    max: POOL_SIZE,
    applicationName: "pglease-bench",
  });
  try {
    const counter = countStatements(pool);
    const leaseRows = leaseTable("public", TABLE);
    await migrate(pool, leaseRows);
    const store = new PgLeaseStore({ pool, table: TABLE, statementTimeoutMs: 60_000 });
    const baselineHeapMb = memoryNow().heapUsedMb;
    const sizes: ScaleFigure[] = [];
    for (const leases of context.budget.leaseCounts) {
      sizes.push(await measureSize(context, pool, store, counter, leases, baselineHeapMb));
      // Each size starts from an empty table, as a process holding only those leases would see it.
      await pool.query(`DELETE FROM ${leaseRows.qualified}`);
    }
    const electors = await measureElectors(context);
    const figures: ScaleFigures = {
      poolSize: POOL_SIZE,
      defaultRenewIntervalMs: DEFAULT_RENEW_INTERVAL_MS,
      sizes,
      electors,
    };
    return {
      group: "scale",
      figures,
      tables: [scaleTable(figures), electorsTable(electors, context.budget.peerTiming.leaseMs)],
    };
  } finally {
    await pool.end();
  }
}

export const scaleGroup: FigureGroup = {
  name: "scale",
  description:
    "1 to 10,000 leases in one process: renewMany vs one each, CPU, memory, openLeases' batched renewals",
  run: runScale,
};
