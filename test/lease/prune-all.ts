// Pruning to the end in one call, for tests: the pruner's timer works within a budget per run.
import type pg from "pg";
import { type HistoryRetention, newWalk, pruneHistory } from "../../src/postgres/history-prune.ts";
import type { LeaseTable } from "../../src/postgres/table.ts";

const WHOLE_PASS = { batch: 1_000, maxBatches: Number.POSITIVE_INFINITY, maxPages: Number.POSITIVE_INFINITY };

/** Every aged batch, then a whole walk over the keys; answers how many entries went. */
export function pruneAll(
  db: Pick<pg.Pool, "query">,
  t: LeaseTable,
  retention: HistoryRetention,
): Promise<number> {
  return pruneHistory(db, t, retention, WHOLE_PASS, newWalk());
}
