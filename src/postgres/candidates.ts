// Every campaigning process, per key: who could lead next (pglease candidates, handover targets).
// Kept cheaply: one statement per process at campaign start, on change, and then once per lease
// duration for all of its keys together; one at stop. A row is live while its seen_until lies
// ahead of the server's clock, so a process that died drops out by itself.
import type pg from "pg";
import { parseFence } from "../shared/fence-token.ts";
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
            WHERE c.key = ANY($2::text[]) AND c.seen_until < now.t - ${KEEP_STALE}),
  announced AS (
    INSERT INTO ${t.candidates} AS c (key, holder, pod, priority, revision, leads, started_at, seen_at, seen_until)
    SELECT entry.key, $1, entry.pod, entry.priority, entry.revision, entry.leads, now.t, now.t,
           now.t + $7 * interval '1 millisecond'
      FROM now, unnest($2::text[], $3::text[], $4::integer[], $5::text[], $6::boolean[])
           AS entry(key, pod, priority, revision, leads)
    -- started_at stays: it is when this process began campaigning for the key.
    ON CONFLICT (key, holder) DO UPDATE SET pod = EXCLUDED.pod, priority = EXCLUDED.priority,
       revision = EXCLUDED.revision, leads = EXCLUDED.leads, seen_at = EXCLUDED.seen_at,
       seen_until = EXCLUDED.seen_until
    RETURNING c.key
  )
  -- In the same round trip, what priority needs: the best other live candidate that leads, and
  -- the live leader with its priority (the statement's snapshot: other processes' rows as committed).
  SELECT a.key,
         (SELECT max(o.priority) FROM ${t.candidates} o
           WHERE o.key = a.key AND o.holder <> $1 AND o.leads AND o.seen_until > now.t) AS others_best,
         l.holder AS leader, l.fence::text AS leader_fence, lc.priority AS leader_priority
    FROM announced a CROSS JOIN now
    LEFT JOIN ${t.qualified} l ON l.key = a.key AND l.expires_at > now.t
    LEFT JOIN ${t.candidates} lc ON lc.key = a.key AND lc.holder = l.holder`;

const withdrawSql = (t: LeaseTable) =>
  `DELETE FROM ${t.candidates} WHERE holder = $1 AND key = ANY($2::text[])`;

// Liveness by the server's clock, the same clock that wrote seen_until.
const listSql = (t: LeaseTable) => `
  SELECT key, holder, pod, priority, revision, leads, started_at, seen_at,
         seen_until > clock_timestamp() AS live
    FROM ${t.candidates}
   WHERE $1::text IS NULL OR key = $1
   ORDER BY key, priority DESC, started_at, holder`;

/** What a candidate learns from its own announcement, per key. */
export interface Standing {
  /** The highest priority among the other live candidates that lead; null when there is none. */
  othersBest: number | null;
  /** The live leader, with its priority when it is a candidate too. */
  leader: { holder: string; fence: number; priority: number | null } | null;
}

interface StandingRow {
  key: string;
  others_best: number | null;
  leader: string | null;
  leader_fence: string | null;
  leader_priority: number | null;
}

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
    this.#sql = {
      announce: announceSql(table),
      withdraw: withdrawSql(table),
      list: listSql(table),
    };
  }

  /**
   * Writes (or refreshes) this holder's candidacy for each entry's key, live for `liveForMs`;
   * answers per key the best priority among the other live candidates that lead, and the leader.
   */
  async announce(
    holder: string,
    entries: readonly CandidateEntry[],
    liveForMs: number,
  ): Promise<Map<string, Standing>> {
    if (entries.length === 0) return new Map();
    const { rows } = await this.#pool.query<StandingRow>({
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
    return new Map(
      rows.map((r) => [
        r.key,
        {
          othersBest: r.others_best,
          leader:
            r.leader === null || r.leader_fence === null
              ? null
              : { holder: r.leader, fence: parseFence(r.leader_fence), priority: r.leader_priority },
        },
      ]),
    );
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
    return this.#select(this.#sql.list, key);
  }

  async #select(text: string, ...values: unknown[]): Promise<Candidate[]> {
    const { rows } = await this.#pool.query<Row>({
      text,
      values,
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
