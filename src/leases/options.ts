// What openLeases and connectLeaseStore accept, with the defaults the composition root applies.
import type pg from "pg";
import type { HistoryRetention } from "../postgres/history-store.ts";

/** Where warnings go: any object with these two methods, such as the sidecar's logger; by default process warnings. */
export interface LeaseLogger {
  info(message: string, fields?: Record<string, unknown>): void;
  warn(message: string, fields?: Record<string, unknown>): void;
}

export interface OpenLeasesOptions {
  /** A postgres:// URL; without it (and without a pool) pg reads PGHOST, PGUSER, … */
  connectionString?: string;
  /** TLS settings for the lease connections; a connection string's own sslmode/sslrootcert win (pg's rule). */
  ssl?: pg.ConnectionConfig["ssl"];
  /** Connections of the lease pool (default 4). */
  poolSize?: number;
  /**
   * A pool of your own, used for nothing but leases: lease statements must never queue behind the
   * application's work. Left open by close().
   */
  pool?: pg.Pool;
  schema?: string;
  table?: string;
  /** Create the table if missing (default true). Off: a missing table is an error. */
  migrate?: boolean;
  /** LISTEN for releases on one dedicated connection (default true); off behind a transaction-mode PgBouncer. */
  notify?: boolean;
  /**
   * How often the notice connection is pinged (default 15 s, the default lease duration; the
   * sidecar uses its lease duration). A notice lost between pings costs a follower at most one
   * observed expiry; a shorter interval finds a silently dead connection sooner, for more statements.
   */
  noticePingIntervalMs?: number;
  /** Named prepared statements (default true); off for PgBouncer < 1.21. */
  preparedStatements?: boolean;
  /**
   * Defaults to holderIdentity(): POD_NAME or the host name, plus a random suffix. Unique per process.
   * Must not contain "#r:": the restart proof is appended after it.
   */
  holder?: string;
  /**
   * Take over at once a live lease held by this pod's dead predecessor (default true): the process
   * holds a restart lock for its life and carries its proof in the holder (see docs/guarantees.md, "Crash
   * failover in restart time").
   */
  restartTakeover?: boolean;
  /**
   * Let a follower take a live lease once its holder's notice session is gone (default false): the
   * holder records that session with each claim, its renewals need it alive, and its leadership
   * ends locally a renew interval plus a call timeout after its last good renew. Needs notify.
   * See docs/guarantees.md, "Crash failover in restart time".
   */
  sessionTakeover?: boolean;
  /** The pod this process runs in; default POD_NAME (or the host name) and POD_UID from the environment. */
  pod?: { name: string; uid?: string | undefined };
  /**
   * The pod's revision label (pod-template-hash or controller-revision-hash), shown with its
   * candidacy; a leader that stops prefers a successor of the newest revision. Default POD_REVISION.
   */
  revision?: string | null;
  /**
   * close()'s release of each lease this process leads also reserves it, in the same statement,
   * for the best live candidate (priority, then the newest revision) for this long, in whole
   * milliseconds (default 5 s); 0 releases to any candidate.
   */
  successorReservationMs?: number;
  /**
   * Deadline of each statement (default 2.5 s, half the default renew interval).
   * A campaign whose callTimeoutMs is shorter is refused: a statement must not outlive the call.
   */
  statementTimeoutMs?: number;
  /**
   * How lease connections get the server-side statement_timeout and lock_timeout (equal to
   * statementTimeoutMs): "startup" (default) sends them when connecting; "role" is for a
   * transaction-mode PgBouncer, which refuses them: set them with ALTER ROLE … SET, checked at open.
   */
  serverTimeouts?: "startup" | "role";
  /** How long an unreachable PostgreSQL is waited for at open (default 60 s); 0 fails at once. */
  startTimeoutMs?: number;
  /** Aborts an open still waiting for PostgreSQL (rejects with StartAborted). */
  signal?: AbortSignal;
  /** Default: warnings as process warnings (printed by Node), info dropped. */
  logger?: LeaseLogger;
  /** application_name of the lease connections (default "pglease"). */
  applicationName?: string;
  /** How much history is kept (default 30 days, 1000 entries per key); pruned by the leading process. */
  historyRetention?: HistoryRetention;
}

export const DEFAULT_STATEMENT_TIMEOUT_MS = 2_500;
export const DEFAULT_START_TIMEOUT_MS = 60_000;
export const DEFAULT_SUCCESSOR_RESERVATION_MS = 5_000;

export const processWarnings: LeaseLogger = {
  info: () => {},
  warn: (message) => process.emitWarning(message, "PgleaseWarning"),
};
