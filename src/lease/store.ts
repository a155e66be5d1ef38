// The lease store on PostgreSQL: each operation is one statement on a pooled connection that
// goes straight back to the pool, and every time that matters is the server's clock_timestamp().
import type pg from "pg";
import { RESTART_PROOF_PATTERN } from "../election/identity.ts";
import type { ClaimAnswer, LeaseStore, LeaseView, RenewAnswer } from "../election/ports.ts";
import { parseFence } from "../fence/token.ts";
import { CHANGE_SETTING, REASON_SETTING } from "./history.ts";
import type { HolderSession } from "./release-feed.ts";
import { type LeaseTable, leaseTable } from "./table.ts";

export interface PgLeaseStoreOptions {
  pool: pg.Pool;
  schema?: string;
  table?: string;
  /** Client-side deadline per statement; keep it at most half the renew interval. */
  statementTimeoutMs: number;
  /** Named prepared statements are faster; PgBouncer < 1.21 in transaction mode needs them off. */
  preparedStatements?: boolean;
  /**
   * Session takeover: the notice session recorded with each claim (null while it is down). Only
   * together with the electors' sessionTakeover, which shortens their local deadline to match:
   * openLeases({ sessionTakeover }) sets both.
   */
  holderSession?: () => HolderSession | null;
}

// One instant per statement for what it writes and reports, so the expiry and the ttl agree.
const NOW = "now AS (SELECT clock_timestamp() AS t)";
const TTL_MS = (col: string) => `(extract(epoch FROM ${col} - now.t) * 1000)::float8`;
// Whether a term is still live is decided by the clock when the row is locked, not when the
// statement started: a statement that queued behind a lock past the expiry finds the term over.
const LIVE = "lease.expires_at > clock_timestamp()";

// A holder's restart proof: {lock token, bind instant}, or NULL without one (src/election/identity.ts).
const PROOF = (row: string) => `(regexp_match(${row}.holder, '${RESTART_PROOF_PATTERN}'))`;

// The term's holder recorded its server session and that session is gone. Only a session recorded
// by this very term counts (a claim that does not write the columns, an older pglease's, bumps the
// fence past them), on this very server (after a restart or a failover every pid is unknown, so
// those terms wait for their expiry); a session whose start is hidden (another role without
// pg_read_all_stats) counts as alive.
const SESSION_GONE = `CASE WHEN lease.session_fence = lease.fence AND lease.session_pid IS NOT NULL
                            AND lease.session_server_started_at = pg_postmaster_start_time()
  THEN NOT EXISTS (SELECT 1 FROM pg_stat_get_activity(lease.session_pid) a
                   WHERE a.backend_start IS NULL OR a.backend_start = lease.session_started_at)
  ELSE false END`;

const claimSql = (t: LeaseTable) => `
  WITH ${NOW},
  claimed AS (
    INSERT INTO ${t.qualified} AS lease (key, holder, fence, acquired_at, expires_at,
                                         session_fence, session_pid, session_started_at, session_server_started_at)
    -- Fences come from a sequence the table does not own: deleting rows or recreating the table never restarts them.
    SELECT $1, $2, drawn.fence, now.t, now.t + $3 * interval '1 millisecond',
           CASE WHEN $4::integer IS NULL THEN NULL ELSE drawn.fence END, $4::integer, $5::timestamptz, $6::timestamptz
      FROM now, (SELECT nextval('${t.fenceSequence}') AS fence) drawn
    ON CONFLICT (key) DO UPDATE SET
      holder = EXCLUDED.holder,
      -- Every win is a new term, the same holder's included: above the sequence and above the row.
      fence = greatest(EXCLUDED.fence, lease.fence + 1),
      acquired_at = EXCLUDED.acquired_at,
      -- Only grows: the holder's queued claim carrying an older clock never shortens its lease.
      expires_at = greatest(lease.expires_at, EXCLUDED.expires_at),
      -- The session belongs to the term it was recorded with: the fence this very update writes.
      session_fence = CASE WHEN EXCLUDED.session_pid IS NULL THEN NULL ELSE greatest(EXCLUDED.fence, lease.fence + 1) END,
      session_pid = EXCLUDED.session_pid, session_started_at = EXCLUDED.session_started_at,
      session_server_started_at = EXCLUDED.session_server_started_at,
      -- A new term starts without a reservation: a handover is over once anyone claims.
      reserved_for = NULL, reserved_until = NULL
    -- A live lease of another holder is taken over only from a predecessor proven dead: both
    -- carry the same restart lock, which the kernel freed for the claimer only when the other died,
    -- bound earlier (so a dead holder's claim delivered late cannot take the lease back).
    WHERE (lease.holder = EXCLUDED.holder OR lease.expires_at <= EXCLUDED.acquired_at
       OR (${PROOF("lease")}[1] = ${PROOF("EXCLUDED")}[1] AND ${PROOF("lease")}[2]::numeric < ${PROOF("EXCLUDED")}[2]::numeric)
       -- Session takeover: the holder's recorded session is gone, and with it the holder's renewals.
       OR ${SESSION_GONE})
      -- A handover's reservation: until it passes only the named candidate may claim, so it claims
      -- first; after it anyone may, so a named candidate that died never leaves the key leaderless.
      AND (lease.reserved_until IS NULL OR lease.reserved_until <= EXCLUDED.acquired_at
           OR lease.reserved_for = EXCLUDED.holder)
    RETURNING holder, fence, acquired_at, expires_at
  ),
  current AS (
    -- FOR SHARE follows a concurrent winner's update to the newest row version.
    -- A claimer a reservation shuts out sees the lease taken until the reservation passes, and
    -- looks again then, not at once.
    SELECT holder, fence, acquired_at,
           CASE WHEN reserved_for IS DISTINCT FROM $2 THEN greatest(expires_at, reserved_until)
                ELSE expires_at END AS expires_at
      FROM ${t.qualified}
    WHERE key = $1 AND NOT EXISTS (SELECT 1 FROM claimed) FOR SHARE
  )
  -- The history trigger publishes how the row changed hands; an insert leaves it unset.
  SELECT true AS won, c.holder, c.fence::text, c.acquired_at, c.expires_at, ${TTL_MS("c.expires_at")} AS ttl_ms,
         nullif(current_setting('${CHANGE_SETTING}', true), '') AS change
    FROM claimed c, now
  UNION ALL
  SELECT false, c.holder, c.fence::text, c.acquired_at, c.expires_at, ${TTL_MS("c.expires_at")}, NULL
    FROM current c, now`;

const renewSql = (t: LeaseTable) => `
  WITH ${NOW}
  -- Only grows: a renew carrying an older clock that commits after a newer one never shortens the lease.
  UPDATE ${t.qualified} AS lease SET expires_at = greatest(lease.expires_at, now.t + $4 * interval '1 millisecond')
  FROM now
  -- Holder and fence pin the term; an expired lease is never resurrected, even by its last holder;
  -- a term whose recorded session is gone may already be taken over.
  WHERE lease.key = $1 AND lease.holder = $2 AND lease.fence = $3 AND ${LIVE} AND NOT ${SESSION_GONE}
  RETURNING lease.expires_at, ${TTL_MS("lease.expires_at")} AS ttl_ms`;

// Ends the term at the statement's instant. acquired_at steps back only when the server clock
// stepped back behind it, so the CHECK holds and the lease is free at once.
const END_TERM =
  "expires_at = now.t, acquired_at = least(lease.acquired_at, now.t - interval '1 microsecond')";

const releaseSql = (t: LeaseTable) => `
  WITH ${NOW},
  released AS (
    -- Expired in place, never deleted: the row stays for operators, and the fence keeps increasing.
    UPDATE ${t.qualified} AS lease SET ${END_TERM}
      FROM now
     WHERE lease.key = $1 AND lease.holder = $2 AND lease.fence = $3 AND ${LIVE}
    RETURNING lease.key
  )
  SELECT key, pg_notify('${t.channel}', key) FROM released`;

const releaseManySql = (t: LeaseTable) => `
  WITH ${NOW},
  released AS (
    UPDATE ${t.qualified} AS lease SET ${END_TERM}
      FROM now, unnest($2::text[], $3::bigint[]) AS term(key, fence)
     -- The same guard as a single release, per row: this holder, that term's fence, still live.
     WHERE lease.key = term.key AND lease.fence = term.fence AND lease.holder = $1 AND ${LIVE}
    RETURNING lease.key, lease.fence
  )
  SELECT key, fence::text, pg_notify('${t.channel}', key) FROM released`;

const readSql = (t: LeaseTable) => `
  WITH ${NOW}
  SELECT key, holder, fence::text, acquired_at, expires_at, ${TTL_MS("expires_at")} AS ttl_ms,
         ${SESSION_GONE} AS session_gone
    FROM ${t.qualified} AS lease, now WHERE key = $1`;

const listSql = (t: LeaseTable) => `
  WITH ${NOW}
  SELECT key, holder, fence::text, acquired_at, expires_at, ${TTL_MS("expires_at")} AS ttl_ms
    FROM ${t.qualified}, now ORDER BY key`;

const renewManySql = (t: LeaseTable) => `
  WITH ${NOW}
  -- Only grows, per row, as in a single renew.
  UPDATE ${t.qualified} AS lease SET expires_at = greatest(lease.expires_at, now.t + $2 * interval '1 millisecond')
  FROM now, unnest($3::text[], $4::bigint[]) AS term(key, fence)
  -- The same guard as a single renew, per row: holder, fence and still live.
  WHERE lease.key = term.key AND lease.fence = term.fence AND lease.holder = $1 AND ${LIVE} AND NOT ${SESSION_GONE}
  RETURNING lease.key, lease.fence::text, lease.expires_at, ${TTL_MS("lease.expires_at")} AS ttl_ms`;

// Administrative release (pglease release): ends whoever holds it now, keeping the fence.
const forceReleaseSql = (t: LeaseTable) => `
  WITH ${NOW},
  -- Names the reason for the history trigger, for this transaction only.
  named AS (SELECT set_config('${REASON_SETTING}', 'forced-release', true) AS reason),
  released AS (
    UPDATE ${t.qualified} AS lease SET ${END_TERM}
      FROM now, named
     WHERE lease.key = $1 AND ${LIVE} AND named.reason IS NOT NULL
    RETURNING lease.key, lease.holder, lease.fence::text
  )
  SELECT key, holder, fence, pg_notify('${t.channel}', key) FROM released`;

type StatementName =
  | "claim"
  | "renew"
  | "release"
  | "releaseMany"
  | "read"
  | "list"
  | "renewMany"
  | "forceRelease";

interface Row {
  key?: string;
  won?: boolean;
  holder: string;
  fence: string;
  acquired_at: Date;
  expires_at: Date;
  ttl_ms: number;
  session_gone?: boolean;
  change?: string | null;
}

/** The trigger's JSON (reason, previous_holder); absent when the row was inserted, a plain claim. */
function changeOf(text: string | null | undefined): { reason: string; previousHolder: string | null } {
  if (!text) return { reason: "claim", previousHolder: null };
  const parsed = JSON.parse(text) as { reason: string; previous_holder: string | null };
  return { reason: parsed.reason, previousHolder: parsed.previous_holder };
}

function view(row: Row & { key: string }): LeaseView {
  return {
    key: row.key,
    holder: row.holder,
    fence: parseFence(row.fence),
    acquiredAt: row.acquired_at,
    expiresAt: row.expires_at,
    ttlMs: row.ttl_ms,
    ...(row.session_gone ? { sessionGone: true } : {}),
  };
}

/** A transient refusal: the elector retries at its retry interval, by then the session is back. */
export class NoHolderSession extends Error {
  constructor() {
    super("not claiming while the notice session reconnects: under session takeover every term records it");
    this.name = "NoHolderSession";
  }
}

export function assertDuration(durationMs: number): void {
  if (!Number.isSafeInteger(durationMs) || durationMs <= 0) {
    throw new RangeError(`lease duration must be a positive whole number of milliseconds, got ${durationMs}`);
  }
}

export class PgLeaseStore implements LeaseStore {
  readonly table: LeaseTable;
  /** For the history's reader and pruner, which are not lease statements of the elector. */
  readonly pool: pg.Pool;
  readonly #pool: pg.Pool;
  readonly #timeoutMs: number;
  readonly #prepared: boolean;
  readonly #sql: Record<StatementName, string>;
  /** Null unless session takeover is on. */
  readonly #session: (() => HolderSession | null) | null;

  constructor(options: PgLeaseStoreOptions) {
    this.table = leaseTable(options.schema, options.table);
    this.#pool = options.pool;
    this.pool = options.pool;
    this.#timeoutMs = options.statementTimeoutMs;
    this.#prepared = options.preparedStatements ?? true;
    this.#session = options.holderSession ?? null;
    const t = this.table;
    this.#sql = {
      claim: claimSql(t),
      renew: renewSql(t),
      release: releaseSql(t),
      releaseMany: releaseManySql(t),
      read: readSql(t),
      list: listSql(t),
      renewMany: renewManySql(t),
      forceRelease: forceReleaseSql(t),
    };
  }

  async #run<R extends pg.QueryResultRow>(name: StatementName, values: unknown[]): Promise<R[]> {
    const text = this.#sql[name];
    const config: pg.QueryConfig & { query_timeout: number } = {
      text,
      values,
      query_timeout: this.#timeoutMs,
      ...(this.#prepared && name !== "renewMany" && name !== "releaseMany"
        ? { name: `pglease_${name}_${this.table.tag}` }
        : {}),
    };
    const result = await this.#pool.query<R>(config);
    return result.rows;
  }

  async claim(key: string, holder: string, durationMs: number): Promise<ClaimAnswer> {
    assertDuration(durationMs);
    const session = this.#session ? this.#session() : null;
    // Every term under session takeover records a live session: one without could not be taken over.
    if (this.#session && !session) throw new NoHolderSession();
    const [row] = await this.#run<Row>("claim", [
      key,
      holder,
      durationMs,
      session?.pid ?? null,
      session?.startedAt ?? null,
      session?.serverStartedAt ?? null,
    ]);
    if (!row) return { won: false, holder: null, fence: null, expiresAt: null, ttlMs: null };
    const fence = parseFence(row.fence);
    if (row.won) {
      return {
        won: true,
        fence,
        acquiredAt: row.acquired_at,
        expiresAt: row.expires_at,
        ttlMs: row.ttl_ms,
        change: changeOf(row.change),
      };
    }
    return { won: false, holder: row.holder, fence, expiresAt: row.expires_at, ttlMs: row.ttl_ms };
  }

  async renew(key: string, holder: string, fence: number, durationMs: number): Promise<RenewAnswer> {
    assertDuration(durationMs);
    const [row] = await this.#run<Row>("renew", [key, holder, fence, durationMs]);
    return row ? { renewed: true, expiresAt: row.expires_at, ttlMs: row.ttl_ms } : { renewed: false };
  }

  /**
   * Renews many terms of one holder in one statement; answers the keys that were renewed.
   * Always planned per call: a prepared generic plan can scan the table once per key when
   * statistics are missing (measured: 64 s for 10,000 leases instead of ~0.1 s).
   */
  async renewMany(
    holder: string,
    terms: ReadonlyArray<{ key: string; fence: number }>,
    durationMs: number,
  ): Promise<Map<string, { fence: number; expiresAt: Date; ttlMs: number }>> {
    assertDuration(durationMs);
    const rows = await this.#run<Row & { key: string }>("renewMany", [
      holder,
      durationMs,
      terms.map((term) => term.key),
      terms.map((term) => String(term.fence)),
    ]);
    return new Map(
      rows.map((row) => [
        row.key,
        { fence: parseFence(row.fence), expiresAt: row.expires_at, ttlMs: row.ttl_ms },
      ]),
    );
  }

  async release(key: string, holder: string, fence: number): Promise<boolean> {
    const rows = await this.#run<{ key: string }>("release", [key, holder, fence]);
    return rows.length > 0;
  }

  /**
   * Releases many terms of one holder in one statement (each still checked against its own fence)
   * and announces each; answers the fence released per key. Planned per call, as renewMany.
   */
  async releaseMany(
    holder: string,
    terms: ReadonlyArray<{ key: string; fence: number }>,
  ): Promise<Map<string, number>> {
    const rows = await this.#run<{ key: string; fence: string }>("releaseMany", [
      holder,
      terms.map((term) => term.key),
      terms.map((term) => String(term.fence)),
    ]);
    return new Map(rows.map((row) => [row.key, parseFence(row.fence)]));
  }

  /** An operator's release of whoever holds the key now; the next claim still bumps the fence. */
  async forceRelease(key: string): Promise<{ holder: string; fence: number } | null> {
    const [row] = await this.#run<{ holder: string; fence: string }>("forceRelease", [key]);
    return row ? { holder: row.holder, fence: parseFence(row.fence) } : null;
  }

  async read(key: string): Promise<LeaseView | null> {
    const [row] = await this.#run<Row & { key: string }>("read", [key]);
    return row ? view(row) : null;
  }

  async list(): Promise<LeaseView[]> {
    const rows = await this.#run<Row & { key: string }>("list", []);
    return rows.map(view);
  }
}
