// The composition root of the lease stack: pool → store → table check or migration → server
// checks → release feed → batched renewals → electors, closed in reverse. The library
// (openLeases), `pglease run`, the demo's replicas (which are `pglease run`) and the operator
// commands (connectLeaseStore) all start here, so start-up, shutdown and the pool are written once.

import { hostname } from "node:os";
import { setTimeout as sleep } from "node:timers/promises";
import pg from "pg";
import type { CandidateOptions } from "./candidacy/candidacy.ts";
import { openCandidacy } from "./candidacy/open.ts";
import type { HandoverRequest, HandoverResult } from "./candidacy/plan.ts";
import { Elector, type ElectorOptions } from "./election/elector.ts";
import { holderIdentity, RESTART_PROOF_MARKER, withRestartProof } from "./election/identity.ts";
import type { ReleaseFeed } from "./election/ports.ts";
import { TimingError, timingOrThrow } from "./election/timing.ts";
import { BatchedRenewals } from "./lease/batched-renewals.ts";
import type { Candidate } from "./lease/candidates.ts";
import { isTooSlow, isUnreachable } from "./lease/connection-errors.ts";
import { HistoryPruner } from "./lease/history-pruner.ts";
import { DEFAULT_RETENTION, type HistoryRetention } from "./lease/history-store.ts";
import { assertTablePresent, migrate } from "./lease/migrate.ts";
import { createLeasePool } from "./lease/pool.ts";
import { type HolderSession, PgReleaseFeed } from "./lease/release-feed.ts";
import { type RestartLock, takeRestartLock } from "./lease/restart-lock.ts";
import { checkServer } from "./lease/server-checks.ts";
import { PgLeaseStore } from "./lease/store.ts";
import { leaseTable } from "./lease/table.ts";

/** Where warnings go; pino's child loggers and the default (process warnings) both fit. */
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
  /** Named prepared statements (default true); off for PgBouncer < 1.21. */
  preparedStatements?: boolean;
  /**
   * Defaults to holderIdentity(): POD_NAME or the host name, plus a random suffix. Unique per process.
   * Must not contain "#r:": the restart proof is appended after it.
   */
  holder?: string;
  /**
   * Take over at once a live lease held by this pod's dead predecessor (default true): the process
   * holds a restart lock for its life and carries its proof in the holder (see README, "Crash
   * failover in restart time").
   */
  restartTakeover?: boolean;
  /**
   * Let a follower take a live lease once its holder's notice session is gone (default false): the
   * holder records that session with each claim, its renewals need it alive, and its leadership
   * ends locally a renew interval plus a call timeout after its last good renew. Needs notify.
   * See README, "Crash failover in restart time".
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
   * Before close() releases a lease this process leads, reserve it for the best live candidate
   * (priority, then the newest revision) for this long (default 5 s); 0 releases to any candidate.
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

export type CampaignOptions = Omit<ElectorOptions, "key" | "holder" | "store" | "releases"> &
  CandidateOptions;

export interface Leases {
  holder: string;
  store: PgLeaseStore;
  /** True when release notices are heard (LISTEN works); false when followers poll. */
  notify: boolean;
  /** The release notices heard, when notify is true (for metrics; a notice is a hint, never proof). */
  releases: ReleaseFeed | undefined;
  /** Creates and starts an elector for `key`; a second campaign for the same key is refused. */
  campaign(key: string, options?: CampaignOptions): Elector;
  /** Every process campaigning for `key` (or for any key), best first, live or not. */
  candidates(key?: string): Promise<Candidate[]>;
  /**
   * Asks the leader of `key` to hand over to a live candidate (`to`: its holder or pod; default the
   * best by priority), which claims first: see README, "Planned handover".
   */
  handover(key: string, request?: HandoverRequest): Promise<HandoverResult>;
  /** Stops every elector (work aborted, leases released), then closes what was opened. Idempotent. */
  close(): Promise<void>;
}

export class StartAborted extends Error {
  constructor() {
    super("stopped before start-up finished");
    this.name = "StartAborted";
  }
}

const DEFAULT_STATEMENT_TIMEOUT_MS = 2_500;
const DEFAULT_START_TIMEOUT_MS = 60_000;
const DEFAULT_SUCCESSOR_RESERVATION_MS = 5_000;

const processWarnings: LeaseLogger = {
  info: () => {},
  warn: (message) => process.emitWarning(message, "PgleaseWarning"),
};

/**
 * Opens the lease stack. A PostgreSQL that is restarting or not up yet is waited for, bounded by
 * startTimeoutMs: a sidecar that exited instead would enter the kubelet's crash-loop backoff.
 */
export async function openLeases(options: OpenLeasesOptions = {}): Promise<Leases> {
  const log = options.logger ?? processWarnings;
  if (options.sessionTakeover && options.notify === false) {
    throw new RangeError(
      "sessionTakeover needs notify: the notice session is what a holder records and what ends with it; drop notify: false or sessionTakeover",
    );
  }
  if (options.holder?.includes(RESTART_PROOF_MARKER)) {
    throw new RangeError(
      `holder ${JSON.stringify(options.holder)} contains "${RESTART_PROOF_MARKER}", which pglease reserves for the restart proof: choose a holder without it`,
    );
  }
  const restartLock = options.restartTakeover === false ? null : await restartLockFor(options, log);
  try {
    return await withStartRetry(options, log, () => openOnce(options, log, restartLock));
  } catch (error) {
    await restartLock?.release();
    throw error;
  }
}

/** The restart lock of this pod and lease table, or null (said once) when this process has none. */
async function restartLockFor(options: OpenLeasesOptions, log: LeaseLogger): Promise<RestartLock | null> {
  // Resolved as pg resolves it (URL, then PG* variables), without credentials.
  const where = new pg.Client(options.pool?.options ?? { connectionString: options.connectionString });
  const result = await takeRestartLock({
    podName: options.pod?.name ?? process.env.POD_NAME ?? hostname(),
    podUid: options.pod ? options.pod.uid : process.env.POD_UID,
    database: `${where.host}:${where.port}/${where.database}`,
    table: leaseTable(options.schema, options.table).qualified,
  });
  if ("lock" in result) return result.lock;
  log.warn(`no restart takeover: ${result.unavailable}`);
  return null;
}

/** The store alone, for one-shot operator commands: no migration, no notices, no electors. */
export async function connectLeaseStore(
  options: OpenLeasesOptions,
): Promise<{ store: PgLeaseStore; pool: pg.Pool; close(): Promise<void> }> {
  const { pool, ownPool } = leasePool(options, options.logger ?? processWarnings);
  const store = leaseStore(options, pool);
  return { store, pool, close: () => (ownPool ? pool.end() : Promise.resolve()) };
}

async function withStartRetry<T>(
  options: OpenLeasesOptions,
  log: LeaseLogger,
  open: () => Promise<T>,
): Promise<T> {
  const startedAt = performance.now();
  const budget = options.startTimeoutMs ?? DEFAULT_START_TIMEOUT_MS;
  const { signal } = options;
  for (let attempt = 1; ; attempt++) {
    try {
      return await open();
    } catch (error) {
      const transient = isUnreachable(error) || isTooSlow(error);
      if (signal?.aborted && transient) throw new StartAborted();
      const left = budget - (performance.now() - startedAt);
      if (!transient || left <= 0) throw error;
      const delay = Math.round(Math.min(5_000, 250 * 2 ** (attempt - 1), left));
      const reason = (error as Error).message;
      const what = isUnreachable(error)
        ? "cannot reach PostgreSQL yet"
        : "PostgreSQL did not answer in time yet";
      log.warn(`${what} (${reason}); retrying in ${delay} ms, for up to ${Math.round(left / 1000)} s more`, {
        err: reason,
        attempt,
      });
      await sleep(delay, undefined, signal ? { signal } : {}).catch(() => {});
      if (signal?.aborted) throw new StartAborted();
    }
  }
}

function leasePool(options: OpenLeasesOptions, log: LeaseLogger): { pool: pg.Pool; ownPool: boolean } {
  if (options.pool) return { pool: options.pool, ownPool: false };
  const pool = createLeasePool({
    ...(options.connectionString ? { connectionString: options.connectionString } : {}),
    ...(options.ssl !== undefined ? { ssl: options.ssl } : {}),
    ...(options.poolSize !== undefined ? { max: options.poolSize } : {}),
    ...(options.applicationName ? { applicationName: options.applicationName } : {}),
    // The server gives up on a statement when its caller does: it can then never commit later.
    statementTimeoutMs: options.statementTimeoutMs ?? DEFAULT_STATEMENT_TIMEOUT_MS,
    ...(options.serverTimeouts ? { serverTimeouts: options.serverTimeouts } : {}),
    onIdleError: (error) =>
      log.warn("an idle database connection failed; the pool replaced it", { err: error.message }),
  });
  return { pool, ownPool: true };
}

function leaseStore(
  options: OpenLeasesOptions,
  pool: pg.Pool,
  holderSession?: () => HolderSession | null,
): PgLeaseStore {
  return new PgLeaseStore({
    ...(holderSession ? { holderSession } : {}),
    pool,
    schema: options.schema,
    table: options.table,
    statementTimeoutMs: options.statementTimeoutMs ?? DEFAULT_STATEMENT_TIMEOUT_MS,
    preparedStatements: options.preparedStatements,
  });
}

async function openOnce(
  options: OpenLeasesOptions,
  log: LeaseLogger,
  restartLock: RestartLock | null,
): Promise<Leases> {
  const { pool, ownPool } = leasePool(options, log);
  const closers: Array<() => Promise<unknown>> = ownPool ? [() => pool.end()] : [];
  const closeAll = async () => {
    for (const close of closers.splice(0).reverse()) await close().catch(() => {});
  };
  try {
    let feed: PgReleaseFeed | undefined;
    const store = leaseStore(
      options,
      pool,
      options.sessionTakeover ? () => feed?.session() ?? null : undefined,
    );
    await inspectServer(pool, options.statementTimeoutMs ?? DEFAULT_STATEMENT_TIMEOUT_MS, log);
    if (options.migrate ?? true) await migrate(pool, store.table);
    else await assertTablePresent(pool, store.table);
    feed =
      options.notify === false ? undefined : await listen(pool, store, log, options.sessionTakeover ?? false);
    if (options.sessionTakeover && !feed) {
      log.warn("session takeover is off: LISTEN was refused, so there is no notice session to record");
    }
    if (feed) closers.push(() => feed.close());
    return leasesOn(options, store, feed, restartLock, closeAll, log);
  } catch (error) {
    await closeAll();
    throw error;
  }
}

/** What the guarantees assume of the server: a standby is refused, every other risk is said once. */
async function inspectServer(pool: pg.Pool, statementTimeoutMs: number, log: LeaseLogger): Promise<void> {
  const { refusals, warnings } = await checkServer(pool, statementTimeoutMs);
  if (refusals.length > 0) throw new ServerRefused(refusals);
  for (const warning of warnings) log.warn(warning);
}

/** The server cannot hold leases safely (a standby in recovery, say); not retried. */
export class ServerRefused extends Error {
  readonly refusals: string[];
  constructor(refusals: string[]) {
    super(refusals.join("; "));
    this.name = "ServerRefused";
    this.refusals = refusals;
  }
}

/** LISTEN on one dedicated connection; refused (a transaction-mode PgBouncer), followers poll instead. */
async function listen(
  pool: pg.Pool,
  store: PgLeaseStore,
  log: LeaseLogger,
  pinnedSession: boolean,
): Promise<PgReleaseFeed | undefined> {
  // The pool's own settings, so a pool passed in is listened to on its own server.
  const feed = new PgReleaseFeed({
    connection: pool.options,
    table: store.table,
    pinnedSession,
    onError: (error) =>
      log.warn("release notices interrupted; polling until reconnected", { err: error.message }),
  });
  try {
    await feed.start();
    return feed;
  } catch (error) {
    await feed.close();
    if (isUnreachable(error)) throw error;
    log.warn(
      "could not LISTEN for release notices (behind a transaction-mode PgBouncer use notify: false / --no-notify); polling instead",
      { err: (error as Error).message },
    );
    return undefined;
  }
}

function leasesOn(
  options: OpenLeasesOptions,
  store: PgLeaseStore,
  feed: PgReleaseFeed | undefined,
  restartLock: RestartLock | null,
  closeAll: () => Promise<void>,
  log: LeaseLogger,
): Leases {
  const statementTimeoutMs = options.statementTimeoutMs ?? DEFAULT_STATEMENT_TIMEOUT_MS;
  const base = options.holder ?? holderIdentity(options.pod?.name);
  const holder = restartLock ? withRestartProof(base, restartLock) : base;
  // Leases renewed in the same tick go out as one statement.
  const renewals = new BatchedRenewals(store);
  const electors = new Map<string, Elector>();
  const pruner = new HistoryPruner({
    pool: store.pool,
    table: store.table,
    retention: options.historyRetention ?? DEFAULT_RETENTION,
    leading: () => [...electors.values()].some((e) => e.isLeader()),
    onError: (error) =>
      log.warn("could not prune the lease history; trying again later", { err: error.message }),
  });
  pruner.start();
  const { candidacy, candidates, handover } = openCandidacy({
    pool: store.pool,
    table: store.table,
    holder,
    pod: options.pod?.name ?? process.env.POD_NAME ?? hostname(),
    revision: options.revision === undefined ? (process.env.POD_REVISION ?? null) : options.revision,
    feed,
    statementTimeoutMs,
    log,
  });
  const successorMs = options.successorReservationMs ?? DEFAULT_SUCCESSOR_RESERVATION_MS;
  let closing: Promise<void> | undefined;
  return {
    holder,
    store,
    notify: feed !== undefined,
    releases: feed,
    candidates,
    handover,
    campaign(key, { priority, preempt, noLead, campaign, ...campaignOptions } = {}) {
      if (closing) throw new Error(`cannot campaign for lease ${key}: these leases are closed`);
      if (electors.has(key)) {
        throw new Error(
          `lease ${key} is already campaigned for by this process (holder ${holder}): one campaign per key, ` +
            "since two campaigns would share one term and one fence; keep the Elector the first campaign returned",
        );
      }
      const timing = timingOrThrow(campaignOptions);
      if (timing.callTimeoutMs < statementTimeoutMs) {
        throw new TimingError([
          `callTimeoutMs (${timing.callTimeoutMs} ms) of lease ${key} is shorter than the statement timeout ` +
            `(${statementTimeoutMs} ms): open the leases with statementTimeoutMs at most ${timing.callTimeoutMs}`,
        ]);
      }
      const gate = candidacy.join(key, timing, { priority, preempt, noLead }, campaign);
      const elector = new Elector({
        ...campaignOptions,
        campaign: gate,
        key,
        holder,
        store: renewals,
        ...(options.sessionTakeover ? { sessionTakeover: true } : {}),
        ...(feed ? { releases: feed } : {}),
      });
      electors.set(key, elector);
      candidacy.attach(key, elector);
      elector.start();
      return elector;
    },
    close() {
      closing ??= (async () => {
        if (successorMs > 0) await candidacy.reserveForSuccessors(successorMs);
        await Promise.all([...electors.values()].map((e) => e.stop()));
        await candidacy.close();
        await pruner.stop();
        await closeAll();
        // Last: until every campaign has ended, nothing of this pod may take over its terms.
        await restartLock?.release();
      })();
      return closing;
    },
  };
}
