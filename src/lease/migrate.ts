import type pg from "pg";
import type { LeaseTable } from "./table.ts";

/** Serializes migrations across every replica and every table: all start at once, one creates. */
export const MIGRATION_LOCK_ID = 0x70676c65; // "pgle"

// The lock is transaction-scoped so it cannot outlive the migration on a pooled connection.
const LOCK = "SELECT pg_advisory_xact_lock($1)";

const createTable = (t: LeaseTable) => `
  CREATE TABLE IF NOT EXISTS ${t.qualified} (
    key         TEXT PRIMARY KEY,
    holder      TEXT NOT NULL,
    fence       BIGINT NOT NULL,
    acquired_at TIMESTAMPTZ NOT NULL,
    expires_at  TIMESTAMPTZ NOT NULL,
    CONSTRAINT "${t.table}_expires_after_acquired" CHECK (expires_at > acquired_at)
  ) WITH (fillfactor = 90)`;

// to_regclass answers NULL instead of raising when the table is absent.
const TABLE_EXISTS = "SELECT to_regclass($1) IS NOT NULL AS present";

// Checked first because CREATE SCHEMA IF NOT EXISTS still needs CREATE on the database.
const SCHEMA_EXISTS = "SELECT to_regnamespace($1) IS NOT NULL AS present";

export class LeaseTableMissingError extends Error {
  constructor(t: LeaseTable) {
    super(
      `lease table ${t.schema}.${t.table} does not exist and migrations are off: run \`pglease migrate\` ` +
        "(or start with --migrate) with a role allowed to create it",
    );
    this.name = "LeaseTableMissingError";
  }
}

/** Creates the lease table if needed, in one transaction under the migration lock. */
export async function migrate(pool: pg.Pool, t: LeaseTable): Promise<void> {
  const client = await pool.connect();
  try {
    await client.query("BEGIN");
    await client.query(LOCK, [MIGRATION_LOCK_ID]);
    const schema = await client.query<{ present: boolean }>(SCHEMA_EXISTS, [`"${t.schema}"`]);
    if (!schema.rows[0]?.present) await client.query(`CREATE SCHEMA IF NOT EXISTS "${t.schema}"`);
    // Checked first too: a role without CREATE on the schema may still use an existing table.
    const table = await client.query<{ present: boolean }>(TABLE_EXISTS, [t.qualified]);
    if (!table.rows[0]?.present) await client.query(createTable(t));
    await client.query("COMMIT");
  } catch (error) {
    await client.query("ROLLBACK").catch(() => {});
    throw error;
  } finally {
    client.release();
  }
}

/** For --no-migrate: fail early and clearly instead of on the first claim. */
export async function assertTablePresent(pool: pg.Pool, t: LeaseTable): Promise<void> {
  const { rows } = await pool.query<{ present: boolean }>(TABLE_EXISTS, [`${t.qualified}`]);
  if (!rows[0]?.present) throw new LeaseTableMissingError(t);
}
