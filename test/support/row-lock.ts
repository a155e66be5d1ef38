// An operator's `SELECT … FOR UPDATE` on a lease row, held open in its own session: every claim,
// renew and release of that key queues behind it on the server while reads go on.
import pg from "pg";
import type { LeaseTable } from "../../src/postgres/table.ts";

export interface RowLock {
  /** Sessions of this database waiting for a lock right now. */
  waiting(): Promise<number>;
  /** Cancels the waiting statements: each fails with PostgreSQL's own "canceling statement" error. */
  cancelWaiters(): Promise<void>;
  /** Commits, so the queued statements go on. */
  release(): Promise<void>;
}

const WAITING = `SELECT pid FROM pg_stat_activity
  WHERE datname = current_database() AND wait_event_type = 'Lock' AND pid <> pg_backend_pid()`;

export async function lockRow(url: string, table: LeaseTable, key: string): Promise<RowLock> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  await client.query("BEGIN");
  const { rowCount } = await client.query(`SELECT 1 FROM ${table.qualified} WHERE key = $1 FOR UPDATE`, [
    key,
  ]);
  if (rowCount !== 1) throw new Error(`no lease row ${key} to lock: claim it once first`);
  let released = false;
  return {
    waiting: async () => (await client.query(WAITING)).rowCount ?? 0,
    cancelWaiters: async () => {
      await client.query(`SELECT pg_cancel_backend(pid) FROM (${WAITING}) AS w`);
    },
    release: async () => {
      if (released) return;
      released = true;
      await client.query("COMMIT");
      await client.end();
    },
  };
}
