// The composition root of the lease stack: pool → store → table check or migration → server
// checks → release feed → batched renewals → electors, closed in reverse. The library
// (openLeases), `pglease run`, the demo's replicas (which are `pglease run`) and the operator
// commands (connectLeaseStore) all start here, so start-up, shutdown and the pool are written once.

import { hostname } from "node:os";
import type pg from "pg";
import type { AnnounceAnswer, CandidateOptions } from "../candidacy/candidacy.ts";
import { openCandidacy } from "../candidacy/open.ts";
import type { HandoverRequest, HandoverResult } from "../candidacy/plan.ts";
import type { CrashWitness } from "../election/crash-witness.ts";
import { type Elector, type ElectorOptions, electorWith, stopElectors } from "../election/elector.ts";
import { holderIdentity, RESTART_PROOF_MARKER, withRestartProof } from "../election/identity.ts";
import type { ReleaseFeed } from "../election/ports.ts";
import { TimingError, timingOrThrow } from "../election/timing.ts";
import { BatchedRenewals } from "../postgres/batched-renewals.ts";
import type { Candidate } from "../postgres/candidates.ts";
import { HistoryPruner } from "../postgres/history-pruner.ts";
import { DEFAULT_RETENTION, type HistoryRetention, MAX_HISTORY_ROWS } from "../postgres/history-store.ts";
import { assertTablePresent, migrate } from "../postgres/migrate.ts";
import type { PgReleaseFeed } from "../postgres/release-feed.ts";
import type { RestartLock } from "../postgres/restart-lock.ts";
import { type PgLeaseStore, releaseToSuccessors } from "../postgres/store.ts";
import {
  inspectServer,
  leasePool,
  leaseStore,
  listen,
  restartLockFor,
  withStartRetry,
} from "./open-steps.ts";
import {
  DEFAULT_STATEMENT_TIMEOUT_MS,
  DEFAULT_SUCCESSOR_RESERVATION_MS,
  type LeaseLogger,
  type OpenLeasesOptions,
  processWarnings,
} from "./options.ts";

export { ServerRefused, SessionTakeoverUnavailable, StartAborted } from "./open-steps.ts";
export type { LeaseLogger, OpenLeasesOptions } from "./options.ts";

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
   * best by priority), which claims first: see docs/operations.md, "Planned handover".
   */
  handover(key: string, request?: HandoverRequest): Promise<HandoverResult>;
  /**
   * Stops every elector (work aborted, leases released), then closes what was opened. Idempotent.
   * From then on campaign, candidates and handover fail saying these leases are closed; a handover
   * still waiting for its target when it began ends so too. Calls under way are awaited first: none
   * reaches the pool (yours included) after close() resolved.
   */
  close(): Promise<void>;
}

/**
 * Opens the lease stack. A PostgreSQL that is restarting or not up yet is waited for, bounded by
 * startTimeoutMs: a sidecar that exited instead would enter the kubelet's crash-loop backoff.
 */
export function openLeases(options: OpenLeasesOptions = {}): Promise<Leases> {
  return openLeasesWith(options, {});
}

/** What only `pglease run` wires in, beside the library's options. */
export interface RunWiring {
  /**
   * Crash takeover: the holders the kubelet reported terminated (src/kube/crash-report.ts). A
   * claim may take their live terms, and each report makes the followers claim at once.
   */
  crashWitness?: CrashWitness;
  /** Each answer to this process's candidacy announcement until it is stored or refused (readiness waits for it). */
  onAnnounced?: (answer: AnnounceAnswer) => void;
  /**
   * The caller is its process's main thread by construction (cmd/pglease.ts runs `pglease run`):
   * the restart lock then need not load node:worker_threads to ask (see takeRestartLock).
   */
  onMainThread?: true;
}

export async function openLeasesWith(options: OpenLeasesOptions, wiring: RunWiring): Promise<Leases> {
  const log = options.logger ?? processWarnings;
  if (options.sessionTakeover && options.notify === false) {
    throw new RangeError(
      "sessionTakeover needs notify: the notice session is what a holder records and what ends with it; drop notify: false or sessionTakeover",
    );
  }
  const ping = options.noticePingIntervalMs;
  // Node's timers take at most 2^31 − 1 ms; a longer one would fire every millisecond.
  if (ping !== undefined && !(Number.isFinite(ping) && ping > 0 && ping <= 2 ** 31 - 1)) {
    throw new RangeError(
      `noticePingIntervalMs must be a positive number of milliseconds up to 2147483647, got ${ping}`,
    );
  }
  if (options.holder?.includes(RESTART_PROOF_MARKER)) {
    throw new RangeError(
      `holder ${JSON.stringify(options.holder)} contains "${RESTART_PROOF_MARKER}", which pglease reserves for the restart proof: choose a holder without it`,
    );
  }
  const successorMs = options.successorReservationMs;
  if (successorMs !== undefined && !(Number.isSafeInteger(successorMs) && successorMs >= 0)) {
    throw new RangeError(
      `successorReservationMs must be 0 (release to any candidate) or a positive whole number of milliseconds, got ${successorMs}`,
    );
  }
  if (options.historyRetention) assertRetention(options.historyRetention);
  const restartLock =
    options.restartTakeover === false ? null : await restartLockFor(options, log, wiring.onMainThread);
  try {
    return await withStartRetry(options, log, () => openOnce(options, log, restartLock, wiring));
  } catch (error) {
    await restartLock?.release();
    throw error;
  }
}

/**
 * The prune passes both bounds to SQL (a bigint, an integer): anything but a positive whole number
 * would fail every prune long after open. The same bounds as the CLI's --history-max-age/-rows.
 */
function assertRetention({ maxAgeMs, maxRowsPerKey }: HistoryRetention): void {
  if (!(Number.isSafeInteger(maxAgeMs) && maxAgeMs > 0)) {
    throw new RangeError(
      `historyRetention.maxAgeMs must be a positive whole number of milliseconds, got ${maxAgeMs}`,
    );
  }
  if (!(Number.isSafeInteger(maxRowsPerKey) && maxRowsPerKey >= 1 && maxRowsPerKey <= MAX_HISTORY_ROWS)) {
    throw new RangeError(
      `historyRetention.maxRowsPerKey must be a whole number of entries from 1 to ${MAX_HISTORY_ROWS}, got ${maxRowsPerKey}`,
    );
  }
}

/** The store alone, for one-shot operator commands: no migration, no notices, no electors. */
export async function connectLeaseStore(
  options: OpenLeasesOptions,
): Promise<{ store: PgLeaseStore; pool: pg.Pool; close(): Promise<void> }> {
  const { pool, ownPool } = leasePool(options, options.logger ?? processWarnings);
  const store = leaseStore(options, pool);
  return { store, pool, close: () => (ownPool ? pool.end() : Promise.resolve()) };
}

async function openOnce(
  options: OpenLeasesOptions,
  log: LeaseLogger,
  restartLock: RestartLock | null,
  wiring: RunWiring,
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
      wiring.crashWitness,
    );
    await inspectServer(pool, options.statementTimeoutMs ?? DEFAULT_STATEMENT_TIMEOUT_MS, log);
    if (options.migrate ?? true) await migrate(pool, store.table);
    else await assertTablePresent(pool, store.table);
    feed = options.notify === false ? undefined : await listen(pool, store, log, options);
    if (feed) closers.push(() => feed.close());
    return leasesOn(options, store, feed, wiring, restartLock, closeAll, log);
  } catch (error) {
    await closeAll();
    throw error;
  }
}

/**
 * The release notices, plus one for every key campaigned each time the witness reports a holder
 * dead: a follower then claims at once, and the claim (which carries the dead holders) wins only if
 * one of them still holds that key. Like any notice, a hint: the claim decides.
 */
function withCrashNotices(
  feed: PgReleaseFeed | undefined,
  witness: CrashWitness | undefined,
  keys: () => Iterable<string>,
): ReleaseFeed | undefined {
  if (!witness) return feed;
  const notices = feed;
  return {
    subscribe(listener) {
      const heard = notices?.subscribe(listener);
      const reported = witness.subscribe(() => {
        for (const key of keys()) listener(key);
      });
      return () => {
        heard?.();
        reported();
      };
    },
    ...(notices
      ? {
          subscribeReconnects: (l: () => void) => notices.subscribeReconnects(l),
          healthy: () => notices.healthy(),
          subscribeUnhealthy: (l: () => void) => notices.subscribeUnhealthy(l),
          subscribeSessionLost: (l: () => void) => notices.subscribeSessionLost(l),
        }
      : {}),
  };
}

function leasesOn(
  options: OpenLeasesOptions,
  store: PgLeaseStore,
  feed: PgReleaseFeed | undefined,
  { crashWitness, onAnnounced }: RunWiring,
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
  const releases = withCrashNotices(feed, crashWitness, () => electors.keys());
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
    onAnnounced,
    log,
  });
  const successorMs = options.successorReservationMs ?? DEFAULT_SUCCESSOR_RESERVATION_MS;
  let closing: Promise<void> | undefined;
  // Aborted when close() begins: a handover waiting for its target stops looking at the row.
  const closed = new AbortController();
  // Candidates and handover calls under way: close() waits for them before it ends the pool, and
  // a caller's pool, which close() leaves open, sees no statement of these leases after close().
  const running = new Set<Promise<unknown>>();
  const refuseClosed = (what: string) => {
    if (closing)
      throw new Error(`cannot ${what}: these leases are closed; open them again (openLeases) to do it`);
  };
  /**
   * A call through the pool: refused once close() began; one that was running then fails as the
   * close's doing (`ended`, its cause the pool's own error), never as the pool's alone.
   */
  const whileOpen = async <T>(what: string, ended: string, call: () => Promise<T>): Promise<T> => {
    refuseClosed(what);
    const answer = call();
    running.add(answer);
    try {
      return await answer;
    } catch (error) {
      if (!closing) throw error;
      throw new Error(ended, { cause: error });
    } finally {
      running.delete(answer);
    }
  };
  return {
    holder,
    store,
    notify: feed !== undefined,
    releases: feed,
    candidates: (key) =>
      whileOpen(
        key === undefined ? "list the candidates" : `list the candidates of lease ${key}`,
        "listing the candidates ended: these leases were closed while it ran; list them from leases that are open",
        () => candidates(key),
      ),
    handover: (key, request) =>
      whileOpen(
        `hand over lease ${key}`,
        // The reservation may be written already, and the target may still claim within it.
        `handover of lease ${key} ended: these leases were closed while it ran; the handover may still ` +
          "happen (its reservation stands): see the lease with pglease status, and hand over again from leases that are open",
        () => handover(key, request, closed.signal),
      ),
    campaign(key, { priority, preempt, noLead, campaign, ...campaignOptions } = {}) {
      refuseClosed(`campaign for lease ${key}`);
      if (electors.has(key)) {
        throw new Error(
          `lease ${key} is already campaigned for by this process (holder ${holder}): one campaign per key, ` +
            "since two campaigns would share one term and one fence; keep the Elector the first campaign returned",
        );
      }
      // Resolved once here; the candidacy and the elector take this object as is.
      const timing = timingOrThrow(campaignOptions);
      if (timing.callTimeoutMs < statementTimeoutMs) {
        throw new TimingError([
          `callTimeoutMs (${timing.callTimeoutMs} ms) of lease ${key} is shorter than the statement timeout ` +
            `(${statementTimeoutMs} ms): open the leases with statementTimeoutMs at most ${timing.callTimeoutMs}`,
        ]);
      }
      const gate = candidacy.join(key, timing, { priority, preempt, noLead }, campaign);
      const elector = electorWith(timing, {
        ...campaignOptions,
        campaign: gate,
        key,
        holder,
        store: renewals,
        ...(options.sessionTakeover ? { sessionTakeover: true } : {}),
        ...(releases ? { releases } : {}),
      });
      electors.set(key, elector);
      candidacy.attach(key, elector);
      elector.start();
      return elector;
    },
    close() {
      closing ??= (async () => {
        closed.abort(new Error("these leases were closed"));
        // Each release then names its successor in the same statement: one round trip, not three.
        if (successorMs > 0) {
          releaseToSuccessors(store, {
            reservationMs: successorMs,
            onRefused: (error) =>
              log.warn("could not reserve the leases for a successor; releasing them to any candidate", {
                err: error.message,
              }),
          });
        }
        // Every term ends here first, then one statement releases them all. Every elector has
        // begun to stop when stopElectors returns its promise, so the candidacy's withdrawal goes
        // out on another connection beside the release instead of after it (and no handover
        // notice is a request to this process from then on).
        await Promise.all([stopElectors(electors.values(), renewals), candidacy.close()]);
        await pruner.stop();
        await Promise.allSettled(running);
        await closeAll();
        // Last: until every campaign has ended, nothing of this pod may take over its terms.
        await restartLock?.release();
      })();
      return closing;
    },
  };
}
