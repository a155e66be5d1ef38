// Keeps the history bounded from the process that leads: one bounded prune statement at a time,
// on the history alone, so a claim never waits for it; the other replicas stay idle.
import type pg from "pg";
import { type HistoryRetention, newWalk, type PruneBudget, pruneHistory } from "./history-prune.ts";
import type { LeaseTable } from "./table.ts";

/**
 * Per run: up to 100,000 entries by age, a backlog being worked off over several runs instead of
 * in one long burst; the walk over the keys reads up to 10,000 keys at the default 1,000 rows per
 * key (and passes over any number that have not grown), resuming in the next run. Each statement
 * stays bounded either way.
 */
const RUN_BUDGET: PruneBudget = { batch: 1_000, maxBatches: 100, maxPages: 1_000 };
export const PRUNE_INTERVAL_MS = 10 * 60_000;

export interface HistoryPrunerOptions {
  pool: Pick<pg.Pool, "query">;
  table: LeaseTable;
  retention: HistoryRetention;
  /** True while this process leads some lease. */
  leading: () => boolean;
  onError: (error: Error) => void;
}

export class HistoryPruner {
  readonly #options: HistoryPrunerOptions;
  #timer: NodeJS.Timeout | null = null;
  #running: Promise<number> | null = null;
  readonly #walk = newWalk();

  constructor(options: HistoryPrunerOptions) {
    this.#options = options;
  }

  start(intervalMs = PRUNE_INTERVAL_MS): void {
    this.#timer ??= setInterval(() => {
      this.run().catch((error: Error) => this.#options.onError(error));
    }, intervalMs).unref();
  }

  /** Prunes if this process leads; answers how many entries went. One run at a time. */
  run(): Promise<number> {
    if (!this.#options.leading()) return Promise.resolve(0);
    this.#running ??= this.#prune().finally(() => {
      this.#running = null;
    });
    return this.#running;
  }

  #prune(): Promise<number> {
    const { pool, table, retention } = this.#options;
    return pruneHistory(pool, table, retention, RUN_BUDGET, this.#walk);
  }

  async stop(): Promise<void> {
    if (this.#timer) clearInterval(this.#timer);
    this.#timer = null;
    await this.#running?.catch(() => {});
  }
}
