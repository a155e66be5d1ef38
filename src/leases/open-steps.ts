// The composition root's opening steps, each written once for the library, `pglease run` and the
// operator commands: the restart lock, waiting for a PostgreSQL that is not up yet, the pool and
// the store, the server's checks, and the LISTEN connection of the release notices.

import { hostname } from "node:os";
import { setTimeout as sleep } from "node:timers/promises";
import pg from "pg";
import type { CrashWitness } from "../election/crash-witness.ts";
import { isOutOfConnections, isTooSlow, isUnreachable } from "../postgres/connection-errors.ts";
import { createLeasePool } from "../postgres/pool.ts";
import { type HolderSession, PgReleaseFeed } from "../postgres/release-feed.ts";
import { type RestartLock, takeRestartLock } from "../postgres/restart-lock.ts";
import { checkServer } from "../postgres/server-checks.ts";
import { PgLeaseStore } from "../postgres/store.ts";
import { leaseTable } from "../postgres/table.ts";
import {
  DEFAULT_START_TIMEOUT_MS,
  DEFAULT_STATEMENT_TIMEOUT_MS,
  type LeaseLogger,
  type OpenLeasesOptions,
} from "./options.ts";

export class StartAborted extends Error {
  constructor() {
    super("stopped before start-up finished");
    this.name = "StartAborted";
  }
}

/**
 * The restart lock of this pod and lease table, or null (said once) when this process has none.
 * `onMainThread`: the caller knows it runs on the process's main thread (see takeRestartLock).
 */
export async function restartLockFor(
  options: OpenLeasesOptions,
  log: LeaseLogger,
  onMainThread?: true,
): Promise<RestartLock | null> {
  // Resolved as pg resolves it (URL, then PG* variables), without credentials.
  const where = new pg.Client(options.pool?.options ?? { connectionString: options.connectionString });
  const podName = options.pod?.name ?? process.env.POD_NAME;
  const result = await takeRestartLock(
    {
      podName: podName ?? hostname(),
      outsidePod: podName === undefined,
      podUid: options.pod ? options.pod.uid : process.env.POD_UID,
      database: `${where.host}:${where.port}/${where.database}`,
      table: leaseTable(options.schema, options.table).qualified,
    },
    onMainThread,
  );
  if ("lock" in result) return result.lock;
  log.warn(`no restart takeover: ${result.unavailable}`);
  return null;
}

export async function withStartRetry<T>(
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
      const transient = isUnreachable(error) || isTooSlow(error) || isOutOfConnections(error);
      if (signal?.aborted && transient) throw new StartAborted();
      const left = budget - (performance.now() - startedAt);
      if (!transient || left <= 0) throw error;
      const delay = Math.round(Math.min(5_000, 250 * 2 ** (attempt - 1), left));
      const reason = (error as Error).message;
      const what = isUnreachable(error)
        ? "cannot reach PostgreSQL yet"
        : isOutOfConnections(error)
          ? "PostgreSQL has no connection left yet"
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

export function leasePool(options: OpenLeasesOptions, log: LeaseLogger): { pool: pg.Pool; ownPool: boolean } {
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

export function leaseStore(
  options: OpenLeasesOptions,
  pool: pg.Pool,
  holderSession?: () => HolderSession | null,
  crashWitness?: CrashWitness,
): PgLeaseStore {
  return new PgLeaseStore({
    ...(holderSession ? { holderSession } : {}),
    ...(crashWitness ? { crashedHolders: () => crashWitness.dead() } : {}),
    pool,
    schema: options.schema,
    table: options.table,
    statementTimeoutMs: options.statementTimeoutMs ?? DEFAULT_STATEMENT_TIMEOUT_MS,
    preparedStatements: options.preparedStatements,
  });
}

/** What the guarantees assume of the server: a standby is refused, every other risk is said once. */
export async function inspectServer(
  pool: pg.Pool,
  statementTimeoutMs: number,
  log: LeaseLogger,
): Promise<void> {
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

/**
 * Session takeover asked for, and the notice connection refused: every claim records that
 * connection's session, so without it this process could never lead. Not retried.
 */
export class SessionTakeoverUnavailable extends Error {
  constructor(reason: string) {
    super(
      `sessionTakeover (--session-takeover) needs the notice connection, and PostgreSQL refused its LISTEN (${reason}): ` +
        "every claim records that connection's session, so this process could never lead. Connect straight to PostgreSQL " +
        "(no pooler) as a role that may open one connection more than the pool, or drop sessionTakeover to lead without it",
    );
    this.name = "SessionTakeoverUnavailable";
  }
}

/**
 * LISTEN on one dedicated connection; refused (a transaction-mode PgBouncer), followers poll
 * instead, unless session takeover needs it.
 */
export async function listen(
  pool: pg.Pool,
  store: PgLeaseStore,
  log: LeaseLogger,
  options: Pick<OpenLeasesOptions, "sessionTakeover" | "noticePingIntervalMs">,
): Promise<PgReleaseFeed | undefined> {
  // The pool's own settings, so a pool passed in is listened to on its own server.
  const feed = new PgReleaseFeed({
    connection: pool.options,
    table: store.table,
    pinnedSession: options.sessionTakeover ?? false,
    ...(options.noticePingIntervalMs ? { pingIntervalMs: options.noticePingIntervalMs } : {}),
    onError: (error) =>
      log.warn("release notices interrupted; polling until reconnected", { err: error.message }),
  });
  try {
    await feed.start();
    return feed;
  } catch (error) {
    await feed.close();
    // Waited for, as at any other step of the start: a server that is down or slow right now.
    if (isUnreachable(error) || isTooSlow(error)) throw error;
    if (options.sessionTakeover) throw new SessionTakeoverUnavailable((error as Error).message);
    log.warn(
      "could not LISTEN for release notices (behind a transaction-mode PgBouncer use notify: false / --no-notify); polling instead",
      { err: (error as Error).message },
    );
    return undefined;
  }
}
