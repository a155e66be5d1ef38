// The scale group's second half: not renewMany called by hand, but the library's own path —
// openLeases() campaigning for N leases in one process, every elector renewing on its own timer
// through the batched renewals (src/postgres/batched-renewals.ts). Counts the statements sent per
// renew interval once all N are held, by kind, and how long taking and giving back all N takes.

import { setTimeout as delay } from "node:timers/promises";
import type pg from "pg";
import type { Elector } from "../../src/election/elector.ts";
import { openLeases } from "../../src/leases/open-leases.ts";
import { createLeasePool } from "../../src/postgres/pool.ts";
import type { BenchContext, Table } from "../group.ts";
import { memoryNow } from "../measure.ts";
import { watchStatements } from "../pool-statements.ts";
import { count, mb, ms } from "../report.ts";

const TABLE = "bench_electors";
const POOL_SIZE = 4;

type StatementKind = "renewMany" | "renew" | "release" | "other";

export interface ElectorScaleFigure {
  leases: number;
  /** campaign() for every key → every elector leading; null when not all led within the cap. */
  acquireAllMs: number | null;
  /** Electors leading when the acquisition ended (all of them, or at the cap). */
  leadingAfterAcquire: number;
  renewIntervals: number;
  statements: Record<StatementKind, number>;
  /** Renew statements (batched or single) per renew interval: the target is one. */
  renewStatementsPerInterval: number;
  /** Every elector still leading at the end of the window. */
  allLeading: boolean;
  /** close(): every elector stopped and its lease released. */
  closeAllMs: number;
  /** Release statements (batched or single) close() sent: the target is one. */
  closeStatements: number;
  /** Where close()'s time went, from its first release statement; absent in older results. */
  closeSplit?: CloseSplit | null;
  rssMb: number;
}

/**
 * close() split at its first release statement: this process ending every elector's term (wall
 * time, and this process's CPU time, which its GC threads can make the larger), then the
 * statement until its answer arrives (the server's work, the round trip, and whatever this
 * process did meanwhile), then the rest (every elector told, the pool closed).
 */
export interface CloseSplit {
  sentMs: number;
  cpuBeforeSentMs: number;
  answeredMs: number;
}

interface CloseClock {
  /** Set while close() is timed: its start and this process's CPU usage then. */
  from: { at: number; cpu: NodeJS.CpuUsage } | null;
  firstRelease: { sentMs: number; cpuBeforeSentMs: number; answeredMs: number | null } | null;
}

/** Counts what goes through the pool, by kind: one renewMany, single renews, releases, everything else. */
function countByKind(pool: pg.Pool, close: CloseClock): Record<StatementKind, number> {
  const counts: Record<StatementKind, number> = { renewMany: 0, renew: 0, release: 0, other: 0 };
  watchStatements(pool, ({ text, name }) => {
    if (text.includes("pg_notify(")) {
      counts.release++;
      if (close.from && !close.firstRelease) {
        const { at, cpu } = close.from;
        const used = process.cpuUsage(cpu);
        const first = {
          sentMs: performance.now() - at,
          cpuBeforeSentMs: (used.user + used.system) / 1000,
          answeredMs: null as number | null,
        };
        close.firstRelease = first;
        return () => {
          first.answeredMs = performance.now() - at;
        };
      }
    }
    // The renew of many terms, not any statement over arrays (the candidates' announcement is one).
    else if (text.includes("unnest(") && text.includes("SET expires_at = greatest(")) counts.renewMany++;
    else if (name.startsWith("pglease_renew_")) counts.renew++;
    else counts.other++;
  });
  return counts;
}

/** Bounds the acquisition of all N, so a slow host reports a figure rather than holding the bench. */
const ACQUIRE_CAP_MS = 90_000;

function leadingCount(electors: Elector[]): number {
  return electors.reduce((n, e) => n + (e.isLeader() ? 1 : 0), 0);
}

async function allLeading(electors: Elector[], signal: AbortSignal): Promise<boolean> {
  const deadline = performance.now() + ACQUIRE_CAP_MS;
  while (performance.now() < deadline) {
    signal.throwIfAborted();
    if (leadingCount(electors) === electors.length) return true;
    await delay(20, undefined, { signal });
  }
  return false;
}

async function measureCount(context: BenchContext, leases: number): Promise<ElectorScaleFigure> {
  // Statements may take at most the electors' call timeout (half the renew interval), as the library asks.
  const statementTimeoutMs = Math.floor(context.budget.peerTiming.leaseMs / 6);
  const pool = createLeasePool({
    connectionString: context.databaseUrl,
    max: POOL_SIZE,
    applicationName: "pglease-bench",
    statementTimeoutMs,
  });
  const closeClock: CloseClock = { from: null, firstRelease: null };
  const counts = countByKind(pool, closeClock);
  let library: Awaited<ReturnType<typeof openLeases>> | undefined;
  try {
    library = await openLeases({
      pool,
      table: TABLE,
      notify: false,
      holder: `bench-electors-${leases}`,
      statementTimeoutMs,
    });
    const t0 = performance.now();
    const open = library;
    // The peers' lease (the library's default in full runs), renewed at its default third.
    const leaseDurationMs = context.budget.peerTiming.leaseMs;
    const renewMs = leaseDurationMs / 3;
    const electors = Array.from({ length: leases }, (_, i) =>
      open.campaign(`electors-${leases}-${i}`, { leaseDurationMs }),
    );
    const acquired = await allLeading(electors, context.signal);
    const acquireAllMs = acquired ? performance.now() - t0 : null;
    const leadingAfterAcquire = leadingCount(electors);
    // One full interval first, so every elector has renewed once on its own schedule.
    await delay(renewMs, undefined, { signal: context.signal });
    const intervals = context.budget.electorRenewIntervals;
    Object.assign(counts, { renewMany: 0, renew: 0, release: 0, other: 0 });
    await delay(intervals * renewMs, undefined, { signal: context.signal });
    const statements = { ...counts };
    const leading = leadingCount(electors) === leases;
    const rssMb = memoryNow().rssMb;
    counts.release = 0;
    const t1 = performance.now();
    closeClock.from = { at: t1, cpu: process.cpuUsage() };
    await library.close();
    const closeAllMs = performance.now() - t1;
    const closeStatements = counts.release;
    const first = closeClock.firstRelease;
    const closeSplit =
      first && first.answeredMs !== null
        ? { sentMs: first.sentMs, cpuBeforeSentMs: first.cpuBeforeSentMs, answeredMs: first.answeredMs }
        : null;
    if (closeSplit) {
      context.progress(
        `scale: close() of ${count(leases)}: release sent at ${ms(closeSplit.sentMs)} ms ` +
          `(${ms(closeSplit.cpuBeforeSentMs)} ms of this process's CPU), answered at ${ms(closeSplit.answeredMs)} ms, ` +
          `done at ${ms(closeAllMs)} ms`,
      );
    }
    return {
      leases,
      acquireAllMs,
      leadingAfterAcquire,
      renewIntervals: intervals,
      statements,
      renewStatementsPerInterval: (statements.renewMany + statements.renew) / intervals,
      allLeading: leading,
      closeAllMs,
      closeStatements,
      closeSplit,
      rssMb,
    };
  } finally {
    // Idempotent: a second close() after the timed one only waits for it.
    await library?.close();
    if (library) await pool.query(`DELETE FROM public.${TABLE}`);
    await pool.end();
  }
}

export async function measureElectors(context: BenchContext): Promise<ElectorScaleFigure[]> {
  const figures: ElectorScaleFigure[] = [];
  for (const leases of context.budget.electorCounts) {
    context.progress(`scale: ${count(leases)} electors through openLeases`);
    figures.push(await measureCount(context, leases));
  }
  return figures;
}

export function electorsTable(figures: ElectorScaleFigure[], leaseMs: number): Table {
  return {
    title: `One process campaigning for many leases through openLeases (pool of ${POOL_SIZE}, lease ${leaseMs / 1000} s, renew every ${(leaseMs / 3000).toFixed(1)} s)`,
    columns: [
      "leases",
      "all leading after ms",
      "renew statements per interval",
      "renewMany / single renew / other",
      "still all leading",
      "close() ms",
      "release statements",
      "RSS MB",
    ],
    rows: figures.map((f) => [
      count(f.leases),
      f.acquireAllMs === null
        ? `${count(f.leadingAfterAcquire)} leading at ${ACQUIRE_CAP_MS / 1000} s`
        : ms(f.acquireAllMs),
      f.renewStatementsPerInterval.toFixed(1),
      `${count(f.statements.renewMany)} / ${count(f.statements.renew)} / ${count(f.statements.other)}`,
      f.allLeading ? "yes" : "no",
      ms(f.closeAllMs),
      count(f.closeStatements),
      mb(f.rssMb),
    ]),
    notes: [
      "Every elector started at once on a free key; the timing is the peers group's (the library's default in full runs).",
      "Statements counted through the pool over the stated renew intervals, after one interval that lets every elector renew once.",
      "Target: one renew statement per interval for all of them (every elector of the process wakes on one timer per grid instant; its renews go out as one UPDATE … FROM unnest).",
      "Other: the candidates' announcement (one statement per lease duration for every key of the process, which lists it as a candidate for handovers).",
      "close() ends every elector's term locally, then releases them all in one statement (each row checked against its holder and fence). Target: 10,000 in < 200 ms.",
    ],
  };
}
