// Reading the history (pglease history); history-prune.ts keeps it bounded.
import type pg from "pg";
import { parseFence } from "../shared/fence-token.ts";
import type { HistoryRetention } from "./history-prune.ts";
import type { LeaseTable } from "./table.ts";

export type { HistoryRetention } from "./history-prune.ts";

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

export const DEFAULT_RETENTION: HistoryRetention = { maxAgeMs: 30 * 24 * 3_600_000, maxRowsPerKey: 1_000 };
/** The most entries per key a retention may keep (the CLI's --history-max-rows and openLeases alike). */
export const MAX_HISTORY_ROWS = 10_000_000;

// The newest `limit` by id (the order of the commits' triggers per key), returned oldest first.
const listSql = (t: LeaseTable) => `
  SELECT id::text, key, fence, holder, previous_holder, reason, changed_at FROM (
    SELECT id, key, fence::text, holder, previous_holder, reason, changed_at
      FROM ${t.history.table}
     WHERE ($1::text IS NULL OR key = $1)
       AND ($2::bigint IS NULL OR changed_at >= clock_timestamp() - $2 * interval '1 millisecond')
     ORDER BY id DESC LIMIT $3
  ) newest ORDER BY newest.id`;

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
