// Figure group "footprint": how long the library takes from `new Elector` + `start()` to its
// first `acquired`, with a pool that is already connected and with a brand-new one (connect +
// migrate, as a process start pays); and `pglease run` as a process (cli-footprint.ts).
import { Elector, type TickReport } from "../../src/election/elector.ts";
import { migrate } from "../../src/postgres/migrate.ts";
import { createLeasePool } from "../../src/postgres/pool.ts";
import { PgLeaseStore } from "../../src/postgres/store.ts";
import { leaseTable } from "../../src/postgres/table.ts";
import type { BenchContext, FigureGroup, GroupResult, Table } from "../group.ts";
import { type LatencyStats, latencyStats, timeRepeated } from "../measure.ts";
import { count, ms } from "../report.ts";
import { type CliVariantFigures, cliFootprintTable, measureCliFootprint } from "./cli-footprint.ts";

const TABLE = "bench_footprint";
const TIMING = { leaseDurationMs: 15_000, renewIntervalMs: 5_000, retryIntervalMs: 2_000 };

export interface FootprintFigures {
  startup: {
    /** new Elector + start() → acquired, the pool already connected. */
    connectedPool: LatencyStats;
    /** new pool + migrate (table present) + new Elector + start() → acquired. */
    newPool: LatencyStats;
  };
  /** `pglease run`: spawn → first acquired, and idle RSS, outside a cluster and publishing. */
  cli: CliVariantFigures[];
}

/** Starts an elector on a free key and resolves at its first `acquired`; stops it (releasing) afterwards. */
async function startUntilAcquired(store: PgLeaseStore, key: string): Promise<() => Promise<void>> {
  const elector = new Elector({ key, holder: `bench-${key}`, store, ...TIMING });
  const acquired = new Promise<void>((resolve, reject) => {
    const onTransition = (report: TickReport) => {
      if (report.outcome === "acquired") {
        elector.off("transition", onTransition);
        resolve();
      } else if (report.outcome !== "transient-error") {
        reject(new Error(`bench workload broken: elector for a free key ended in ${report.outcome}`));
      }
    };
    elector.on("transition", onTransition);
  });
  elector.start();
  const stopped = () => elector.stop();
  try {
    await acquired;
  } catch (error) {
    await stopped();
    throw error;
  }
  return stopped;
}

export async function runFootprint(context: BenchContext): Promise<GroupResult<FootprintFigures>> {
  const { budget, signal, databaseUrl } = context;
  const table = leaseTable("public", TABLE);
  // Undone last-in first-out, so every elector stops (and releases) before its pool ends.
  const undo: Array<() => Promise<unknown>> = [];
  const undoAll = async () => {
    for (const step of undo.splice(0).reverse()) await step();
  };
  try {
    const pool = createLeasePool({ connectionString: databaseUrl, applicationName: "pglease-bench" });
    undo.push(() => pool.end());
    await migrate(pool, table);
    const store = new PgLeaseStore({ pool, table: TABLE, statementTimeoutMs: 2_000 });
    context.progress("footprint: elector start-up on a connected pool");
    undo.push(await startUntilAcquired(store, "warm-up"));
    const connected = await timeRepeated(budget.startups, budget.maxMsPerFigure, signal, async (i) => {
      undo.push(await startUntilAcquired(store, `connected-${i}`));
    });
    await undoAll();

    context.progress("footprint: elector start-up on a new pool");
    const newPool = await timeRepeated(budget.startups, budget.maxMsPerFigure, signal, async (i) => {
      const ownPool = createLeasePool({ connectionString: databaseUrl, applicationName: "pglease-bench" });
      undo.push(() => ownPool.end());
      await migrate(ownPool, table);
      const ownStore = new PgLeaseStore({ pool: ownPool, table: TABLE, statementTimeoutMs: 2_000 });
      undo.push(await startUntilAcquired(ownStore, `new-pool-${i}`));
    });
    await undoAll();
    const cli = await measureCliFootprint(context);
    const figures: FootprintFigures = {
      startup: { connectedPool: latencyStats(connected, 1), newPool: latencyStats(newPool, 1) },
      cli,
    };
    return { group: "footprint", figures, tables: [tableOf(figures), cliFootprintTable(cli)] };
  } finally {
    await undoAll();
  }
}

function tableOf(figures: FootprintFigures): Table {
  const row = (label: string, stats: LatencyStats) => [
    label,
    ms(stats.p50Ms),
    ms(stats.p99Ms),
    ms(stats.meanMs),
    count(stats.samples),
  ];
  return {
    title: "Library start-up: new Elector + start() until the first acquired",
    columns: ["variant", "p50 ms", "p99 ms", "mean ms", "samples"],
    rows: [
      row("pool already connected", figures.startup.connectedPool),
      row("new pool + migrate (table present)", figures.startup.newPool),
    ],
    notes: ["The first tick of a free lease is a read then a claim: two round trips."],
  };
}

export const footprintGroup: FigureGroup = {
  name: "footprint",
  description: "library and pglease run start-up until the first acquired lease, idle RSS of pglease run",
  run: runFootprint,
};
