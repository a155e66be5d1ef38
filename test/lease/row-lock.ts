// An operator's (or a stalled commit's) hold on a lease row: a transaction on its own connection
// that locks the row until the test says so, and a probe for statements queued behind it on the
// server, so a test can act exactly while a lease statement waits there.
import pg from "pg";
import { expect } from "vitest";

export interface RowLock {
  /** Runs a statement inside the locking transaction. */
  query<R extends pg.QueryResultRow>(text: string, values?: unknown[]): Promise<pg.QueryResult<R>>;
  commit(): Promise<void>;
  rollback(): Promise<void>;
}

/** Takes `SELECT … FOR UPDATE` on the lease row `key` in an open transaction. */
export async function lockRow(url: string, qualified: string, key: string): Promise<RowLock> {
  const client = new pg.Client({ connectionString: url, application_name: "pglease-test-locker" });
  await client.connect();
  await client.query("BEGIN");
  await client.query(`SELECT 1 FROM ${qualified} WHERE key = $1 FOR UPDATE`, [key]);
  const end = async (verb: string) => {
    try {
      await client.query(verb);
    } finally {
      await client.end();
    }
  };
  return {
    query: (text, values) => client.query(text, values),
    commit: () => end("COMMIT"),
    rollback: () => end("ROLLBACK"),
  };
}

const LOCK_WAITERS = `
  SELECT count(*)::int AS n FROM pg_stat_activity
   WHERE datname = current_database() AND wait_event_type = 'Lock' AND (application_name = $1 OR usename = $1)`;

/** Backends in this database waiting for a lock right now, by application name or role. */
export async function lockWaiters(pool: pg.Pool, who: string): Promise<number> {
  const { rows } = await pool.query<{ n: number }>(LOCK_WAITERS, [who]);
  return rows[0]?.n ?? 0;
}

/** Resolves once `count` statements (by application name or role) wait for a lock on the server. */
export async function waitForLockWaiters(pool: pg.Pool, who: string, count = 1): Promise<void> {
  await expect.poll(() => lockWaiters(pool, who), { timeout: 10_000, interval: 10 }).toBe(count);
}
