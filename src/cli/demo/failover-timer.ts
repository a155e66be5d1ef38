// Measures failovers on the server's clock: the instant a leader is stopped is read from
// PostgreSQL just before the signal goes out, and the new term's acquired_at is the instant
// the next leader's claim ran. Polling (every ~20 ms) only finds the new term; it adds
// nothing to the measured time.
import { setTimeout as delay } from "node:timers/promises";
import type pg from "pg";
import { createLeasePool } from "../../postgres/pool.ts";
import { leaseTable } from "../../postgres/table.ts";

const POLL_MS = 20;
const UNDEFINED_TABLE = "42P01";

// The server's clock as text, so the microseconds survive the trip back as a parameter.
const SERVER_NOW = "SELECT clock_timestamp()::text AS now";

const leaseRowSql = (qualified: string) => `
  SELECT holder, fence::text AS fence,
         -- Both instants are the server's: the claim's acquired_at and the stop instant ($2, may be null).
         (extract(epoch FROM acquired_at - $2::timestamptz) * 1000)::float8 AS acquired_after_ms,
         (extract(epoch FROM expires_at - clock_timestamp()) * 1000)::float8 AS ttl_ms
    FROM ${qualified} WHERE key = $1`;

export interface LeaseRow {
  holder: string;
  fence: number;
  /** Time left by the server's clock; zero or less means expired. */
  ttlMs: number;
  /** acquired_at minus the instant given to read(), when one was. */
  acquiredAfterMs: number | null;
}

export interface NewTerm {
  holder: string;
  fence: number;
  failoverMs: number;
}

export class FailoverTimer {
  readonly #pool: pg.Pool;
  readonly #lease: string;
  readonly #sql: string;

  constructor(databaseUrl: string, lease: string) {
    // Two connections: the live view reads while a failover is being timed.
    this.#pool = createLeasePool({ connectionString: databaseUrl, max: 2, applicationName: "pglease-demo" });
    this.#lease = lease;
    this.#sql = leaseRowSql(leaseTable().qualified);
  }

  /** The server's clock now, to pass back to read() as the start of a failover. */
  async serverNow(): Promise<string> {
    const { rows } = await this.#pool.query<{ now: string }>(SERVER_NOW);
    const now = rows[0]?.now;
    if (now === undefined) throw new Error("the server did not tell its clock");
    return now;
  }

  /** The lease row, or null while neither the table nor the row exists yet. */
  async read(since: string | null = null): Promise<LeaseRow | null> {
    try {
      const { rows } = await this.#pool.query<{
        holder: string;
        fence: string;
        acquired_after_ms: number | null;
        ttl_ms: number;
      }>(this.#sql, [this.#lease, since]);
      const row = rows[0];
      if (!row) return null;
      return {
        holder: row.holder,
        fence: Number(row.fence),
        ttlMs: row.ttl_ms,
        acquiredAfterMs: row.acquired_after_ms,
      };
    } catch (error) {
      // The replicas create the table at start; until one has, there is simply no lease.
      if ((error as { code?: unknown }).code === UNDEFINED_TABLE) return null;
      throw error;
    }
  }

  /** Waits for a live lease held by one of ours (a stale row from an earlier run may linger). */
  async waitForLeader(
    isOurs: (holder: string) => boolean,
    timeoutMs: number,
    signal: AbortSignal,
  ): Promise<LeaseRow> {
    return this.#poll(timeoutMs, signal, "no replica took the lease", async () => {
      const row = await this.read();
      return row && row.ttlMs > 0 && isOurs(row.holder) ? row : null;
    });
  }

  /** Waits for a term above oldFence; its failover time is measured from `since`. */
  async waitForNewTerm(
    oldFence: number,
    since: string,
    timeoutMs: number,
    signal: AbortSignal,
  ): Promise<NewTerm> {
    return this.#poll(timeoutMs, signal, `no new leader after fence ${oldFence}`, async () => {
      const row = await this.read(since);
      if (!row || row.fence <= oldFence || row.acquiredAfterMs === null) return null;
      return { holder: row.holder, fence: row.fence, failoverMs: row.acquiredAfterMs };
    });
  }

  close(): Promise<void> {
    return this.#pool.end();
  }

  async #poll<T>(
    timeoutMs: number,
    signal: AbortSignal,
    failure: string,
    attempt: () => Promise<T | null>,
  ): Promise<T> {
    const deadline = performance.now() + timeoutMs;
    for (;;) {
      signal.throwIfAborted();
      const found = await attempt();
      if (found !== null) return found;
      if (performance.now() > deadline) throw new Error(`${failure} within ${timeoutMs} ms`);
      await delay(POLL_MS, undefined, { signal });
    }
  }
}
