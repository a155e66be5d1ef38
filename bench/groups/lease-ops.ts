// Figure group "lease-ops": claim / renew / release / read latency and throughput, on one
// connection and on a pool of 4 driven by 8 concurrent callers, side by side in the same run
// with named vs unnamed statements and with the session advisory lock users would pick instead.
import type pg from "pg";
import { migrate } from "../../src/postgres/migrate.ts";
import { createLeasePool } from "../../src/postgres/pool.ts";
import { PgLeaseStore } from "../../src/postgres/store.ts";
import { leaseTable } from "../../src/postgres/table.ts";
import type { BenchContext, FigureGroup, GroupResult } from "../group.ts";
import { latencyStats, type Sampling, type Steps, timeSteps } from "../measure.ts";
import { handoverStepsTable, measureHandoverSteps } from "./handover-steps.ts";
import { historyCostTable, measureHistoryCost } from "./history-cost.ts";
import {
  type LeaseOpsFigures,
  leaseOpsTables,
  type OperationFigure,
  ratiosOf,
  type Statements,
} from "./lease-ops-tables.ts";
import { measureWal } from "./lease-wal.ts";
import * as work from "./lease-workloads.ts";

const TABLE = "bench_lease_ops";
const STATEMENT_TIMEOUT_MS = 10_000;

interface Setup {
  label: string;
  connections: number;
  concurrency: number;
  /** False only for the diagnostic setup: commits are not waited for, so the WAL flush drops out. */
  flushCommits: boolean;
}

const SETUPS: Setup[] = [
  { label: "1 connection", connections: 1, concurrency: 1, flushCommits: true },
  { label: "pool of 4, concurrency 8", connections: 4, concurrency: 8, flushCommits: true },
  // Where an fsync costs milliseconds it hides every other difference between write statements;
  // this setup shows what the statements themselves cost. Never a configuration for real leases.
  { label: "1 connection, no flush wait (diagnostic)", connections: 1, concurrency: 1, flushCommits: false },
];

/** The bench database's URL, with synchronous_commit=off for the diagnostic setup. */
function setupUrl(databaseUrl: string, setup: Setup): string {
  if (setup.flushCommits) return databaseUrl;
  const url = new URL(databaseUrl);
  url.searchParams.set("options", "-c synchronous_commit=off");
  return url.toString();
}

interface Workload {
  statements: Statements;
  stepsFor: (worker: number) => Steps;
}

/** Keys held, locks taken and connections pinned, then one workload per statement kind. */
async function prepareWorkloads(
  pool: pg.Pool,
  clients: pg.Client[],
  databaseUrl: string,
  setup: Setup,
  setupIndex: number,
): Promise<Workload[]> {
  const workers = Array.from({ length: setup.concurrency }, (_, index) => index);
  const workloads: Workload[] = [];
  for (const statements of ["named", "unnamed"] as const) {
    const store = new PgLeaseStore({
      pool,
      table: TABLE,
      statementTimeoutMs: STATEMENT_TIMEOUT_MS,
      preparedStatements: statements === "named",
    });
    const key = (role: string, worker: number) => `${setupIndex}-${statements}-${role}-${worker}`;
    // The setup's claims go one at a time: all at once they queue for the pool, and a claim that
    // waits past 500 ms for a connection is dropped unsent (StatementNotSent), as on a busy host.
    const fences: number[] = [];
    for (const i of workers) fences.push(await work.hold(store, key("renew", i), work.HOLDER));
    for (const i of workers) await work.hold(store, key("held", i), work.OTHER_HOLDER);
    workloads.push(
      { statements, stepsFor: (i) => work.claimReleaseCycle(store, key("cycle", i)) },
      { statements, stepsFor: (i) => work.renewLoop(store, key("renew", i), work.nth(fences, i)) },
      { statements, stepsFor: (i) => work.readLoop(store, key("held", i)) },
      { statements, stepsFor: (i) => work.failedClaimLoop(store, key("held", i)) },
    );
  }
  for (let i = 0; i < setup.connections; i++) clients.push(await work.connect(databaseUrl));
  const pinned = clients.slice();
  const otherSession = await work.connect(databaseUrl);
  clients.push(otherSession);
  const lockId = (role: number, worker: number) => 0x626e6300 + setupIndex * 1_000 + role * 100 + worker;
  for (const i of workers) await work.lockFromAnotherSession(otherSession, lockId(1, i));
  // Session locks pin their connection, so callers beyond the connection count share one.
  const pinnedFor = (i: number) => work.nth(pinned, i % pinned.length);
  const statements = "named, pinned connection";
  workloads.push(
    { statements, stepsFor: (i) => work.advisoryCycle(pinnedFor(i), lockId(0, i)) },
    { statements, stepsFor: (i) => work.failedTryLockLoop(pinnedFor(i), lockId(1, i)) },
  );
  return workloads;
}

// Workloads take turns in rounds, so a slow spell of the disk (a checkpoint, the host's
// neighbours) spreads over all of them instead of landing on whichever ran at that moment.
const ROUNDS = 8;

async function measureSetup(
  context: BenchContext,
  setup: Setup,
  setupIndex: number,
): Promise<OperationFigure[]> {
  const { budget, signal } = context;
  const databaseUrl = setupUrl(context.databaseUrl, setup);
  const pool = createLeasePool({
    connectionString: databaseUrl,
    max: setup.connections,
    applicationName: "pglease-bench",
  });
  const clients: pg.Client[] = [];
  try {
    const workloads = await prepareWorkloads(pool, clients, databaseUrl, setup, setupIndex);
    const rounds = Math.max(1, Math.min(ROUNDS, budget.iterations));
    const collected = new Map<string, { operation: string; statements: Statements; samples: number[] }>();
    for (let round = 0; round < rounds; round++) {
      context.progress(`lease-ops: ${setup.label}, round ${round + 1}/${rounds}`);
      for (const { statements, stepsFor } of workloads) {
        const sampling: Sampling = {
          warmup: round === 0 ? budget.warmup : 0,
          warmupMaxMs: budget.maxMsPerFigure / 4,
          iterations: Math.ceil(budget.iterations / rounds),
          maxMs: budget.maxMsPerFigure / rounds,
        };
        for (const [operation, samples] of await timeSteps(setup.concurrency, sampling, signal, stepsFor)) {
          const id = `${statements}/${operation}`;
          const entry = collected.get(id) ?? { operation, statements, samples: [] };
          collected.set(id, entry);
          entry.samples.push(...samples);
        }
      }
    }
    return [...collected.values()].map(({ operation, statements, samples }) => ({
      setup: setup.label,
      connections: setup.connections,
      concurrency: setup.concurrency,
      commitFlushed: setup.flushCommits,
      operation,
      statements,
      latency: latencyStats(samples, setup.concurrency),
    }));
  } finally {
    await pool.end();
    await Promise.all(clients.map((client) => client.end()));
  }
}

export async function runLeaseOps(context: BenchContext): Promise<GroupResult<LeaseOpsFigures>> {
  const setupPool = createLeasePool({ connectionString: context.databaseUrl, max: 1 });
  try {
    await migrate(setupPool, leaseTable("public", TABLE));
  } finally {
    await setupPool.end();
  }
  const operations: OperationFigure[] = [];
  for (const [index, setup] of SETUPS.entries())
    operations.push(...(await measureSetup(context, setup, index)));
  context.progress("lease-ops: WAL per statement");
  const walBytesPerOp = await measureWal(context, TABLE, STATEMENT_TIMEOUT_MS);
  const history = await measureHistoryCost(context, STATEMENT_TIMEOUT_MS);
  context.progress("lease-ops: graceful handover, step by step");
  const handover = await measureHandoverSteps(context, context.budget.gracefulTrials);
  const labels = SETUPS.map((setup) => setup.label);
  const figures: LeaseOpsFigures = {
    operations,
    walBytesPerOp,
    ratios: ratiosOf(operations, labels),
    history,
    handover,
  };
  return {
    group: "lease-ops",
    figures,
    tables: [...leaseOpsTables(figures, labels), historyCostTable(history), handoverStepsTable(handover)],
  };
}

export const leaseOpsGroup: FigureGroup = {
  name: "lease-ops",
  description: "claim/renew/release/read latency and ops/s vs advisory locks, named vs unnamed statements",
  run: runLeaseOps,
};
