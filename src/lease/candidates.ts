// Every campaigning process, per key: who could lead next (pglease candidates, handover targets).
// Kept cheaply: one statement per process at campaign start, on change, and then once per lease
// duration for all of its keys together; one at stop. A row is live while its seen_until lies
// ahead of the server's clock, so a process that died drops out by itself.
import type pg from "pg";
import type { LeaseTable } from "./table.ts";

export interface CandidateEntry {
  key: string;
  /** The pod it runs in (what --to accepts besides the holder). */
  pod: string;
  /** Higher leads first when the lease is free; default 0. */
  priority: number;
  /** The pod's revision label (pod-template-hash / controller-revision-hash), or null. */
  revision: string | null;
  /** False in no-lead mode: campaigning as a candidate that never claims. */
  leads: boolean;
}

export interface Candidate extends CandidateEntry {
  holder: string;
  startedAt: Date;
  seenAt: Date;
  /** seen_until is still ahead of the server's clock. */
  live: boolean;
}

export const createCandidatesTable = (t: LeaseTable) => `
  CREATE TABLE IF NOT EXISTS ${t.candidates} (
    key        TEXT NOT NULL,
    holder     TEXT NOT NULL,
    pod        TEXT NOT NULL,
    priority   INTEGER NOT NULL DEFAULT 0,
    revision   TEXT,
    leads      BOOLEAN NOT NULL DEFAULT true,
    started_at TIMESTAMPTZ NOT NULL,
    seen_at    TIMESTAMPTZ NOT NULL,
    seen_until TIMESTAMPTZ NOT NULL,
    PRIMARY KEY (key, holder)
  ) WITH (fillfactor = 90)`;

// How long a row of a process that stopped refreshing stays (shown as not live) before the next
// announcement of the same key deletes it.
const KEEP_STALE = "interval '1 hour'";

const announceSql = (t: LeaseTable) => `
  WITH now AS (SELECT clock_timestamp() AS t),
  -- Rows of processes gone for long are removed by whoever announces the key next: no pruner.
  gone AS (DELETE FROM ${t.candidates} c USING now
            WHERE c.key = ANY($2::text[]) AND c.seen_until < now.t - ${KEEP_STALE})
  INSERT INTO ${t.candidates} AS c (key, holder, pod, priority, revision, leads, started_at, seen_at, seen_until)
  SELECT entry.key, $1, entry.pod, entry.priority, entry.revision, entry.leads, now.t, now.t,
         now.t + $7 * interval '1 millisecond'
    FROM now, unnest($2::text[], $3::text[], $4::integer[], $5::text[], $6::boolean[])
         AS entry(key, pod, priority, revision, leads)
  -- started_at stays: it is when this process began campaigning for the key.
  ON CONFLICT (key, holder) DO UPDATE SET pod = EXCLUDED.pod, priority = EXCLUDED.priority,
     revision = EXCLUDED.revision, leads = EXCLUDED.leads, seen_at = EXCLUDED.seen_at,
     seen_until = EXCLUDED.seen_until`;

const withdrawSql = (t: LeaseTable) =>
  `DELETE FROM ${t.candidates} WHERE holder = $1 AND key = ANY($2::text[])`;

// Liveness by the server's clock, the same clock that wrote seen_until.
const listSql = (t: LeaseTable) => `
  SELECT key, holder, pod, priority, revision, leads, started_at, seen_at,
         seen_until > clock_timestamp() AS live
    FROM ${t.candidates}
   WHERE $1::text IS NULL OR key = $1
   ORDER BY key, priority DESC, started_at, holder`;

interface Row {
  key: string;
  holder: string;
  pod: string;
  priority: number;
  revision: string | null;
  leads: boolean;
  started_at: Date;
  seen_at: Date;
  live: boolean;
}

export class CandidateStore {
  /** The candidates table, quoted (for messages naming the GRANT). */
  readonly table: string;
  readonly #pool: pg.Pool;
  readonly #timeoutMs: number;
  readonly #sql: { announce: string; withdraw: string; list: string };

  constructor(pool: pg.Pool, table: LeaseTable, statementTimeoutMs: number) {
    this.table = table.candidates;
    this.#pool = pool;
    this.#timeoutMs = statementTimeoutMs;
    this.#sql = { announce: announceSql(table), withdraw: withdrawSql(table), list: listSql(table) };
  }

  /** Writes (or refreshes) this holder's candidacy for each entry's key, live for `liveForMs`. */
  async announce(holder: string, entries: readonly CandidateEntry[], liveForMs: number): Promise<void> {
    if (entries.length === 0) return;
    await this.#pool.query({
      text: this.#sql.announce,
      values: [
        holder,
        entries.map((e) => e.key),
        entries.map((e) => e.pod),
        entries.map((e) => e.priority),
        entries.map((e) => e.revision),
        entries.map((e) => e.leads),
        liveForMs,
      ],
      query_timeout: this.#timeoutMs,
    } as pg.QueryConfig);
  }

  async withdraw(holder: string, keys: readonly string[]): Promise<void> {
    if (keys.length === 0) return;
    await this.#pool.query({
      text: this.#sql.withdraw,
      values: [holder, keys],
      query_timeout: this.#timeoutMs,
    } as pg.QueryConfig);
  }

  /** Every candidate of `key` (or of every key), best first: priority, then the earliest to campaign. */
  async list(key: string | null = null): Promise<Candidate[]> {
    const { rows } = await this.#pool.query<Row>({
      text: this.#sql.list,
      values: [key],
      query_timeout: this.#timeoutMs,
    } as pg.QueryConfig);
    return rows.map((r) => ({
      key: r.key,
      holder: r.holder,
      pod: r.pod,
      priority: r.priority,
      revision: r.revision,
      leads: r.leads,
      startedAt: r.started_at,
      seenAt: r.seen_at,
      live: r.live,
    }));
  }
}
