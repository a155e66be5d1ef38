// The lease store on PostgreSQL: each operation is one statement on a pooled connection that
// goes straight back to the pool, and every time that matters is the server's clock_timestamp().
import type pg from "pg";
import type { ClaimAnswer, LeaseStore, LeaseView, RenewAnswer } from "../election/ports.ts";
import { parseFence } from "../shared/fence-token.ts";
import {
  releaseManySql,
  releaseManyToSuccessorsSql,
  renewManySql,
  runReleaseMany,
  runRenewMany,
} from "./bulk-statements.ts";
import { claimSql, runClaim } from "./claim-statement.ts";
import { isServerError } from "./connection-errors.ts";
import { REASON_SETTING } from "./history.ts";
import type { HolderSession } from "./release-feed.ts";
import {
  END_TERM,
  LIVE,
  NO_SUCCESSOR,
  NOW,
  SESSION_GONE,
  SUCCESSOR,
  type SuccessorParts,
  TTL_MS,
} from "./statement-parts.ts";
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
  /**
   * Crash takeover: the holders (each with a restart proof) the kubelet reported terminated; a
   * claim may take a live term of one of them. `pglease run --crash-takeover` fills it. Name only
   * holders a real witness saw die: a live holder named here loses its term while it believes.
   * A graceful stop's release (releaseToSuccessors) never reserves for one of them.
   */
  crashedHolders?: () => readonly string[];
}

const renewSql = (t: LeaseTable) => `
  WITH ${NOW}
  -- Only grows: a renew carrying an older clock that commits after a newer one never shortens the lease.
  UPDATE ${t.qualified} AS lease SET expires_at = greatest(lease.expires_at, now.t + $4 * interval '1 millisecond')
  FROM now
  -- Holder and fence pin the term; an expired lease is never resurrected, even by its last holder;
  -- a term whose recorded session is gone may already be taken over.
  WHERE lease.key = $1 AND lease.holder = $2 AND lease.fence = $3 AND ${LIVE} AND NOT ${SESSION_GONE}
  RETURNING lease.expires_at, ${TTL_MS("lease.expires_at")} AS ttl_ms`;

// With a successor (a graceful stop, $4 its reservation in ms, $5 the holders reported terminated),
// the same UPDATE also reserves the lease for its best live candidate (statement-parts.ts, SUCCESSOR).
const releaseSql = (t: LeaseTable, s: SuccessorParts = NO_SUCCESSOR) => `
  WITH ${NOW},${s.cte}
  released AS (
    -- Expired in place, never deleted: the row stays for operators, and the fence keeps increasing.
    UPDATE ${t.qualified} AS lease SET ${END_TERM}${s.set}
      FROM now${s.join}
     -- Holder and fence: only this term ends, and only its lease is reserved for a successor.
     WHERE lease.key = $1 AND lease.holder = $2 AND lease.fence = $3 AND ${LIVE}
    RETURNING lease.key${s.returning}
  )
  SELECT key, pg_notify('${t.channel}', key)${s.notify} FROM released`;

const readSql = (t: LeaseTable) => `
  WITH ${NOW}
  SELECT key, holder, fence::text, acquired_at, expires_at, ${TTL_MS("expires_at")} AS ttl_ms,
         ${SESSION_GONE} AS session_gone
    FROM ${t.qualified} AS lease, now WHERE key = $1`;

const listSql = (t: LeaseTable) => `
  WITH ${NOW}
  SELECT key, holder, fence::text, acquired_at, expires_at, ${TTL_MS("expires_at")} AS ttl_ms
    FROM ${t.qualified}, now ORDER BY key`;

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
  | "releaseToSuccessor"
  | "releaseManyToSuccessors"
  | "read"
  | "list"
  | "renewMany"
  | "forceRelease";

interface Row {
  key: string;
  holder: string;
  fence: string;
  acquired_at: Date;
  expires_at: Date;
  ttl_ms: number;
  session_gone?: boolean;
}

function view(row: Row): LeaseView {
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

/**
 * How long a claim may wait for a pool connection and still be sent. The elector waits for an
 * unanswered write until its call timeout plus 1 s after the call (unanswered-writes.ts), and the
 * server may run a statement for up to the statement timeout (at most the call timeout) once it
 * starts: a claim sent later than this could commit after that wait, a term nobody leads.
 */
const CLAIM_SEND_WINDOW_MS = 500;

/**
 * A claim that waited for a connection of the lease pool past its window is dropped before it
 * reaches the server: its caller has given up on it (or soon will), and a claim nobody waits for
 * would only win a term to release. Transient: the elector tries again at its next tick. Other
 * statements are sent however long they waited: a late release or renew changes nothing it
 * should not (both are scoped to the term).
 */
export class StatementNotSent extends Error {
  /** Never reached the server: it cannot commit (read by the elector, which imports no driver). */
  readonly notSent = true;
  constructor(waitedMs: number, windowMs: number) {
    super(
      `claim waited ${Math.round(waitedMs)} ms for a connection of the lease pool, past its ${windowMs} ms: not sent ` +
        "(raise the pool size, or keep other work off the lease pool)",
    );
    this.name = "StatementNotSent";
  }
}

/** A transient refusal: the elector retries at its retry interval, by then the session is back. */
export class NoHolderSession extends Error {
  /** Thrown before anything is sent: no write of it can commit (read by the elector, as for StatementNotSent). */
  readonly notSent = true;
  constructor() {
    super("not claiming while the notice session reconnects: under session takeover every term records it");
    this.name = "NoHolderSession";
  }
}

/** What a graceful stop asks of every release: the reservation's length, and whom to tell when the server refuses it. */
export interface Successor {
  reservationMs: number;
  onRefused: (error: Error) => void;
}

let toSuccessors: (store: PgLeaseStore, successor: Successor) => void;

/**
 * From now on, every release `store` sends (close()'s, of every term it leads) also reserves the
 * lease for its best live candidate for `reservationMs` (a positive whole number, checked by
 * openLeases), in the same statement: the claim lets only that candidate claim until the
 * reservation passes (statement-parts.ts, SUCCESSOR). A key without a live candidate is released
 * as before.
 */
export function releaseToSuccessors(store: PgLeaseStore, successor: Successor): void {
  toSuccessors(store, successor);
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
  readonly #crashed: () => readonly string[];
  /** Set by releaseToSuccessors (a graceful stop): every release then reserves for the best live candidate. */
  #successor: Successor | null = null;

  static {
    toSuccessors = (store, successor) => {
      store.#successor = successor;
    };
  }

  constructor(options: PgLeaseStoreOptions) {
    this.table = leaseTable(options.schema, options.table);
    this.#pool = options.pool;
    this.pool = options.pool;
    this.#timeoutMs = options.statementTimeoutMs;
    this.#prepared = options.preparedStatements ?? true;
    this.#session = options.holderSession ?? null;
    this.#crashed = options.crashedHolders ?? (() => []);
    const t = this.table;
    this.#sql = {
      claim: claimSql(t),
      renew: renewSql(t),
      release: releaseSql(t),
      releaseMany: releaseManySql(t),
      releaseToSuccessor: releaseSql(
        t,
        SUCCESSOR(t, {
          keys: "ARRAY[$1::text]",
          holder: "$2",
          reservationMs: "$4::bigint",
          crashed: "$5::text[]",
          on: "$1",
        }),
      ),
      releaseManyToSuccessors: releaseManyToSuccessorsSql(t),
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
      // The many-lease statements are planned per call (bulk-statements.ts says why).
      ...(this.#prepared &&
      name !== "renewMany" &&
      name !== "releaseMany" &&
      name !== "releaseManyToSuccessors"
        ? { name: `pglease_${name}_${this.table.tag}` }
        : {}),
    };
    const asked = performance.now();
    const client = await this.#pool.connect();
    let failed: Error | undefined;
    // A checked-out client's socket errors are ours to catch (pool.query does the same): the
    // statement then fails, and the broken connection is destroyed, not returned.
    const broken = (error: Error) => {
      failed = error;
    };
    client.on("error", broken);
    try {
      const waitedMs = performance.now() - asked;
      const windowMs = Math.min(this.#timeoutMs, CLAIM_SEND_WINDOW_MS);
      if (name === "claim" && waitedMs >= windowMs) throw new StatementNotSent(waitedMs, windowMs);
      return (await client.query<R>(config)).rows;
    } catch (error) {
      // As pool.query does: a connection whose statement failed is not handed to the next one.
      if (!(error instanceof StatementNotSent)) failed ??= error as Error;
      throw error;
    } finally {
      client.off("error", broken);
      client.release(failed);
    }
  }

  async claim(key: string, holder: string, durationMs: number): Promise<ClaimAnswer> {
    assertDuration(durationMs);
    const session = this.#session ? this.#session() : null;
    // Every term under session takeover records a live session: one without could not be taken over.
    if (this.#session && !session) throw new NoHolderSession();
    return runClaim(
      (values) => this.#run("claim", values),
      key,
      holder,
      durationMs,
      session,
      this.#crashed(),
    );
  }

  async renew(key: string, holder: string, fence: number, durationMs: number): Promise<RenewAnswer> {
    assertDuration(durationMs);
    const [row] = await this.#run<{ expires_at: Date; ttl_ms: number }>("renew", [
      key,
      holder,
      fence,
      durationMs,
    ]);
    return row ? { renewed: true, expiresAt: row.expires_at, ttlMs: row.ttl_ms } : { renewed: false };
  }

  /** Renews many terms of one holder in one statement (bulk-statements.ts); answers the keys renewed. */
  renewMany(
    holder: string,
    terms: ReadonlyArray<{ key: string; fence: number }>,
    durationMs: number,
  ): Promise<Map<string, { fence: number; expiresAt: Date; ttlMs: number }>> {
    assertDuration(durationMs);
    return runRenewMany((values) => this.#run("renewMany", values), holder, terms, durationMs);
  }

  async release(key: string, holder: string, fence: number): Promise<boolean> {
    const rows = await this.#release<{ key: string }>("release", [key, holder, fence]);
    return rows.length > 0;
  }

  /** Releases many terms of one holder in one statement (bulk-statements.ts); answers the fence released per key. */
  releaseMany(
    holder: string,
    terms: ReadonlyArray<{ key: string; fence: number }>,
  ): Promise<Map<string, number>> {
    return runReleaseMany((values) => this.#release("releaseMany", values), holder, terms);
  }

  /**
   * A release statement, with the successor reservation once releaseToSuccessors asked for it. A
   * server that refuses that statement (the role cannot read the candidates table, say) wrote
   * nothing: the release is sent again without it and goes to whichever candidate claims first.
   */
  async #release<R extends pg.QueryResultRow>(
    name: "release" | "releaseMany",
    values: unknown[],
  ): Promise<R[]> {
    const successor = this.#successor;
    if (!successor) return this.#run<R>(name, values);
    try {
      const withSuccessor = name === "release" ? "releaseToSuccessor" : "releaseManyToSuccessors";
      return await this.#run<R>(withSuccessor, [...values, successor.reservationMs, this.#crashed()]);
    } catch (error) {
      if (!isServerError(error)) throw error;
      successor.onRefused(error);
      return this.#run<R>(name, values);
    }
  }

  /** An operator's release of whoever holds the key now; the next claim still bumps the fence. */
  async forceRelease(key: string): Promise<{ holder: string; fence: number } | null> {
    const [row] = await this.#run<{ holder: string; fence: string }>("forceRelease", [key]);
    return row ? { holder: row.holder, fence: parseFence(row.fence) } : null;
  }

  async read(key: string): Promise<LeaseView | null> {
    const [row] = await this.#run<Row>("read", [key]);
    return row ? view(row) : null;
  }

  async list(): Promise<LeaseView[]> {
    const rows = await this.#run<Row>("list", []);
    return rows.map(view);
  }
}
