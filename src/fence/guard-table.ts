// Where the guard rows live, and the migration that creates them. Schema and table come from
// configuration, so they are validated against a conservative identifier syntax and always
// quoted when spliced into SQL; resources and fences only ever travel as parameters.
import type { Pool } from "pg";
import { identifierProblem } from "../shared/sql-identifier.ts";
import { inTransaction } from "../shared/transaction.ts";

export const DEFAULT_FENCE_SCHEMA = "public";
export const DEFAULT_FENCE_TABLE = "pglease_fences";

export interface FenceTable {
  schema: string;
  table: string;
  /** `"schema"."table"`, safe to splice into SQL text. */
  qualified: string;
}

export function fenceTable(schema = DEFAULT_FENCE_SCHEMA, table = DEFAULT_FENCE_TABLE): FenceTable {
  const problems = [identifierProblem("schema", schema), identifierProblem("table", table)].filter(
    (p): p is string => p !== null,
  );
  if (problems.length > 0) throw new TypeError(`fence guard: ${problems.join("; ")}`);
  return { schema, table, qualified: `"${schema}"."${table}"` };
}

/** Serializes guard-table migrations across replicas: all start at once, one creates, the rest find it done. */
export const FENCE_MIGRATION_LOCK_ID = 0x7066656e; // "pfen"

// Transaction-scoped, so the lock cannot outlive the migration on a pooled connection.
const TAKE_MIGRATION_LOCK = "SELECT pg_advisory_xact_lock($1)";

// to_regclass/to_regnamespace answer NULL instead of raising, and skipping DDL when the table
// exists lets a role without CREATE privilege start against a table made by someone else.
const FIND_TABLE_AND_SCHEMA =
  "SELECT to_regclass($1) IS NOT NULL AS table_present, to_regnamespace($2) IS NOT NULL AS schema_present";

// The CHECK keeps hand-written rows from smuggling in a fence no lease can ever issue.
const createGuardTable = (t: FenceTable) => `
  CREATE TABLE IF NOT EXISTS ${t.qualified} (
    resource   TEXT PRIMARY KEY,
    fence      BIGINT NOT NULL CHECK (fence > 0),
    updated_at TIMESTAMPTZ NOT NULL DEFAULT clock_timestamp()
  ) WITH (fillfactor = 90)`;

/** Creates the guard table if it is missing, in one transaction under the migration lock. */
export async function migrateFenceTable(pool: Pick<Pool, "connect">, t: FenceTable): Promise<void> {
  await inTransaction(pool, async (client) => {
    await client.query(TAKE_MIGRATION_LOCK, [FENCE_MIGRATION_LOCK_ID]);
    const { rows } = await client.query<{ table_present: boolean; schema_present: boolean }>(
      FIND_TABLE_AND_SCHEMA,
      [t.qualified, `"${t.schema}"`],
    );
    const found = rows[0];
    if (found?.table_present) return;
    if (!found?.schema_present) {
      throw new Error(
        `fence guard: schema "${t.schema}" does not exist; create it (CREATE SCHEMA "${t.schema}") ` +
          "or configure an existing schema for the guard table",
      );
    }
    await client.query(createGuardTable(t));
  });
}

/** The error for a guard table nobody created, with the way out. */
export function missingTableError(t: FenceTable, cause: unknown): Error {
  return new Error(
    `fence guard table ${t.qualified} does not exist: call createFenceGuard({ pool }).migrate() once at ` +
      'start with a role that may create it, or create it by hand (docs/fencing.md, "Plain SQL, without the helper")',
    { cause },
  );
}
