// The library's front door: one pool, one release listener and one holder identity per
// process, shared by every lease it campaigns for.
import type pg from "pg";
import { Elector, type ElectorOptions } from "../election/elector.ts";
import { holderIdentity } from "../election/identity.ts";
import { TimingError } from "../election/timing.ts";
import { BatchedRenewals } from "../lease/batched-renewals.ts";
import { assertTablePresent, migrate } from "../lease/migrate.ts";
import { createLeasePool } from "../lease/pool.ts";
import { PgReleaseFeed } from "../lease/release-feed.ts";
import { PgLeaseStore } from "../lease/store.ts";

export interface OpenLeasesOptions {
  /** A postgres:// URL; without it (and without a pool) pg reads PGHOST, PGUSER, … */
  connectionString?: string;
  /** Your own pool; it is left open by close(). */
  pool?: pg.Pool;
  schema?: string;
  table?: string;
  /** Create the table if missing (default true). Off: a missing table is an error. */
  migrate?: boolean;
  /** LISTEN for releases on one dedicated connection (default true); off behind a transaction-mode PgBouncer. */
  notify?: boolean;
  /** Named prepared statements (default true); off for PgBouncer < 1.21. */
  preparedStatements?: boolean;
  /** Defaults to holderIdentity(): POD_NAME or the host name, plus a random suffix. */
  holder?: string;
  /**
   * Client-side deadline of each statement (default 2.5 s, half the default renew interval).
   * A campaign whose callTimeoutMs is shorter is refused: a statement must not outlive the call.
   */
  statementTimeoutMs?: number;
}

export type CampaignOptions = Omit<ElectorOptions, "key" | "holder" | "store" | "releases">;

export interface Leases {
  holder: string;
  store: PgLeaseStore;
  /** Creates and starts an elector for `key`. */
  campaign(key: string, options?: CampaignOptions): Elector;
  /** Stops every elector (work aborted, leases released), then closes what was opened. Idempotent. */
  close(): Promise<void>;
}

export async function openLeases(options: OpenLeasesOptions = {}): Promise<Leases> {
  const ownPool = options.pool === undefined;
  const statementTimeoutMs = options.statementTimeoutMs ?? 2_500;
  const pool = options.pool ?? createLeasePool({ connectionString: options.connectionString });
  const store = new PgLeaseStore({
    pool,
    schema: options.schema,
    table: options.table,
    statementTimeoutMs,
    preparedStatements: options.preparedStatements,
  });
  let feed: PgReleaseFeed | undefined;
  try {
    if (options.migrate ?? true) await migrate(pool, store.table);
    else await assertTablePresent(pool, store.table);
    if (options.notify ?? true) {
      // The pool's own settings, so a pool passed in is listened to on its own server.
      feed = new PgReleaseFeed({ connection: pool.options, table: store.table });
      await feed.start();
    }
  } catch (error) {
    await feed?.close();
    if (ownPool) await pool.end();
    throw error;
  }
  const holder = options.holder ?? holderIdentity();
  // Leases renewed in the same tick go out as one statement.
  const renewals = new BatchedRenewals(store);
  const electors: Elector[] = [];
  let closing: Promise<void> | undefined;
  return {
    holder,
    store,
    campaign(key, campaignOptions = {}) {
      const elector = new Elector({
        ...campaignOptions,
        key,
        holder,
        store: renewals,
        ...(feed ? { releases: feed } : {}),
      });
      if (elector.timing.callTimeoutMs < statementTimeoutMs) {
        throw new TimingError([
          `callTimeoutMs (${elector.timing.callTimeoutMs} ms) of lease ${key} is shorter than the statement timeout ` +
            `(${statementTimeoutMs} ms): open the leases with statementTimeoutMs at most ${elector.timing.callTimeoutMs}`,
        ]);
      }
      electors.push(elector);
      elector.start();
      return elector;
    },
    close() {
      closing ??= (async () => {
        await Promise.all(electors.map((e) => e.stop()));
        await feed?.close();
        if (ownPool) await pool.end();
      })();
      return closing;
    },
  };
}
