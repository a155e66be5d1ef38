// An operator's (or a stalled commit's) `SELECT … FOR UPDATE` on a lease row, held open in its own
// session until the test says so: every claim, renew and release of that key queues behind it on
// the server while reads go on. With probes for the statements queued there, so a test can act
// exactly while a lease statement waits, and cancel them with PostgreSQL's own error.
import pg from "pg";
import { expect } from "vitest";

export interface RowLock {
  /** Runs a statement inside the locking transaction. */
  query<R extends pg.QueryResultRow>(text: string, values?: unknown[]): Promise<pg.QueryResult<R>>;
  /** Sessions of this database waiting for a lock right now (any but this one). */
  waiting(): Promise<number>;
  /** Cancels the waiting statements: each fails with PostgreSQL's own "canceling statement" error. */
  cancelWaiters(): Promise<void>;
  /** Commits, so the queued statements go on; once only, later calls do nothing. */
  commit(): Promise<void>;
  /** Rolls back; once only, later calls (or a commit after it) do nothing. */
  rollback(): Promise<void>;
}

const WAITING = `SELECT pid FROM pg_stat_activity
  WHERE datname = current_database() AND wait_event_type = 'Lock' AND pid <> pg_backend_pid()`;

/** Takes `SELECT … FOR UPDATE` on the lease row `key` of `qualified` in an open transaction. */
export async function lockRow(url: string, qualified: string, key: string): Promise<RowLock> {
  const client = new pg.Client({ connectionString: url, application_name: "pglease-test-locker" });
  await client.connect();
  await client.query("BEGIN");
  const { rowCount } = await client.query(`SELECT 1 FROM ${qualified} WHERE key = $1 FOR UPDATE`, [key]);
  if (rowCount !== 1) {
    await client.end();
    throw new Error(`no lease row ${key} to lock: claim it once first`);
  }
  let ended = false;
  const end = async (verb: string) => {
    if (ended) return;
    ended = true;
    try {
      await client.query(verb);
    } finally {
      await client.end();
    }
  };
  return {
    query: (text, values) => client.query(text, values),
    waiting: async () => (await client.query(WAITING)).rowCount ?? 0,
    cancelWaiters: async () => {
      await client.query(`SELECT pg_cancel_backend(pid) FROM (${WAITING}) AS w`);
    },
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
