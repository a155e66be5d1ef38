// Reading the history (pglease history) and keeping it bounded. Pruning is its own statement on
// the history alone: it never touches the lease table, so it can never hold up a claim.
import type pg from "pg";
import { parseFence } from "../fence/token.ts";
import type { LeaseTable } from "./table.ts";

export interface HistoryEntry {
  id: number;
  key: string;
  fence: number;
  /** Who holds the lease after the change; null when the change ended a term. */
  holder: string | null;
  previousHolder: string | null;
  reason: string;
  /** The database server's clock_timestamp() in the statement that made the change. */
  changedAt: Date;
}

export interface HistoryQuery {
  /** Only this lease; every lease when absent. */
  key?: string;
  /** Only entries at most this old by the server's clock. */
  sinceMs?: number;
  /** The newest this many, printed oldest first. */
  limit: number;
}

export interface HistoryRetention {
  /** Entries older than this are pruned (the newest of each key always stays). */
  maxAgeMs: number;
  /** At most this many entries per key. */
  maxRowsPerKey: number;
}

export const DEFAULT_RETENTION: HistoryRetention = { maxAgeMs: 30 * 24 * 3_600_000, maxRowsPerKey: 1_000 };

// The newest `limit` by id (the order of the commits' triggers per key), returned oldest first.
const listSql = (t: LeaseTable) => `
  SELECT id::text, key, fence, holder, previous_holder, reason, changed_at FROM (
    SELECT id, key, fence::text, holder, previous_holder, reason, changed_at
      FROM ${t.history.table}
     WHERE ($1::text IS NULL OR key = $1)
       AND ($2::bigint IS NULL OR changed_at >= clock_timestamp() - $2 * interval '1 millisecond')
     ORDER BY id DESC LIMIT $3
  ) newest ORDER BY newest.id`;

// The prune function deletes with SKIP LOCKED, at most $3 entries per call.
const pruneSql = (t: LeaseTable) => `SELECT ${t.history.pruneFunction}($1, $2, $3)::int AS pruned`;

interface Row {
  id: string;
  key: string;
  fence: string;
  holder: string | null;
  previous_holder: string | null;
  reason: string;
  changed_at: Date;
}

export async function readHistory(
  db: Pick<pg.Pool, "query">,
  t: LeaseTable,
  query: HistoryQuery,
): Promise<HistoryEntry[]> {
  const { rows } = await db.query<Row>(listSql(t), [query.key ?? null, query.sinceMs ?? null, query.limit]);
  return rows.map((row) => ({
    id: Number(row.id),
    key: row.key,
    fence: parseFence(row.fence),
    holder: row.holder,
    previousHolder: row.previous_holder,
    reason: row.reason,
    changedAt: row.changed_at,
  }));
}

/** One bounded batch; answers how many entries went. */
export async function pruneHistory(
  db: Pick<pg.Pool, "query">,
  t: LeaseTable,
  retention: HistoryRetention,
  batch = 1_000,
): Promise<number> {
  const { rows } = await db.query<{ pruned: number }>(pruneSql(t), [
    retention.maxAgeMs,
    retention.maxRowsPerKey,
    batch,
  ]);
  return rows[0]?.pruned ?? 0;
}
