// Keeps the history bounded from the process that leads: one bounded prune statement at a time,
// on the history alone, so a claim never waits for it; the other replicas stay idle.
import type pg from "pg";
import { type HistoryRetention, pruneHistory } from "./history-store.ts";
import type { LeaseTable } from "./table.ts";

const BATCH = 1_000;
/** Batches per run: a backlog is worked off over several runs instead of in one long burst. */
const MAX_BATCHES = 10;
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

  async #prune(): Promise<number> {
    const { pool, table, retention } = this.#options;
    let total = 0;
    for (let i = 0; i < MAX_BATCHES; i++) {
      const pruned = await pruneHistory(pool, table, retention, BATCH);
      total += pruned;
      if (pruned < BATCH) break;
    }
    return total;
  }

  async stop(): Promise<void> {
    if (this.#timer) clearInterval(this.#timer);
    this.#timer = null;
    await this.#running?.catch(() => {});
  }
}
