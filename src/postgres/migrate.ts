import type pg from "pg";
import { inTransaction } from "../shared/transaction.ts";
import { createCandidatesTable } from "./candidates.ts";
import { createRecordFunction, migrateHistory, missingHistory } from "./history.ts";
import type { LeaseTable } from "./table.ts";

/** Serializes migrations across every replica and every table: all start at once, one creates. */
export const MIGRATION_LOCK_ID = 0x70676c65; // "pgle"

// The lock is transaction-scoped so it cannot outlive the migration on a pooled connection.
const LOCK = "SELECT pg_advisory_xact_lock($1)";

// SET LOCAL ends with the transaction, so the connection goes back to the pool with its short timeouts.
const MIGRATION_TIMEOUTS = "SET LOCAL statement_timeout = '60s'; SET LOCAL lock_timeout = '60s'";

const createTable = (t: LeaseTable) => `
  CREATE TABLE IF NOT EXISTS ${t.qualified} (
    key         TEXT PRIMARY KEY,
    holder      TEXT NOT NULL,
    fence       BIGINT NOT NULL,
    acquired_at TIMESTAMPTZ NOT NULL,
    expires_at  TIMESTAMPTZ NOT NULL,
    ${ADDED_COLUMNS.join(",\n    ")},
    CONSTRAINT "${t.table}_expires_after_acquired" CHECK (expires_at > acquired_at)
  ) WITH (fillfactor = ${FILLFACTOR})`;

// Half of each page free: one statement that renews or releases every lease of a page (renewMany,
// the batched release of close()) writes a new version of each row, and only the free space takes
// it in place (HOT, no index entry). At 90, 11-46 % of a 10,000-row renewMany were HOT and it cost
// about twice the server CPU (docs/operations.md, Bloat).
const FILLFACTOR = 50;

// Every earlier version made the table with this; any other value is the operator's, kept.
const EARLIER_FILLFACTOR = 90;

// Settable by the owner alone, under a lock that blocks no lease statement; pages written from then
// on keep the space free. The lease role migrating a table it does not own leaves it as it is.
const FIND_FILLFACTOR = `
  SELECT coalesce(reloptions @> ARRAY['fillfactor=${EARLIER_FILLFACTOR}'], false) AS earlier,
         pg_has_role(relowner, 'USAGE') AS owned
    FROM pg_class WHERE oid = to_regclass($1)`;
const setFillfactor = (t: LeaseTable) => `ALTER TABLE ${t.qualified} SET (fillfactor = ${FILLFACTOR})`;

// Session takeover: the server session a holder recorded with its term (null unless it did).
const SESSION_COLUMNS = [
  "session_fence BIGINT",
  "session_pid INTEGER",
  "session_started_at TIMESTAMPTZ",
  "session_server_started_at TIMESTAMPTZ",
];

// Handover: only reserved_for may claim the lease until reserved_until (null: no reservation).
const RESERVATION_COLUMNS = ["reserved_for TEXT", "reserved_until TIMESTAMPTZ"];

/** Columns newer than the table's first version, added to an existing table by a migration. */
const ADDED_COLUMNS = [...SESSION_COLUMNS, ...RESERVATION_COLUMNS];

// Nullable without a default: adding them rewrites nothing, so an existing table upgrades at once.
const addColumns = (t: LeaseTable) =>
  `ALTER TABLE ${t.qualified} ${ADDED_COLUMNS.map((c) => `ADD COLUMN IF NOT EXISTS ${c}`).join(", ")}`;

const FIND_ADDED_COLUMNS = `
  SELECT count(*) = ${ADDED_COLUMNS.length} AS present FROM pg_attribute
   WHERE attrelid = to_regclass($1) AND attname = ANY($2) AND NOT attisdropped`;

const addedColumnNames = ADDED_COLUMNS.map((c) => c.split(" ")[0]);

// Not OWNED BY the table: DROP TABLE and TRUNCATE … RESTART IDENTITY leave the counter where it was.
const createFenceSequence = (t: LeaseTable) => `CREATE SEQUENCE ${t.fenceSequence} AS bigint MINVALUE 1`;

// For a table made before the sequence: the next fence is above every fence its rows hold.
const continueAboveRows = (t: LeaseTable) =>
  `SELECT setval('${t.fenceSequence}', max(fence)) FROM ${t.qualified} HAVING max(fence) IS NOT NULL`;

// to_regclass answers NULL instead of raising when the relation is absent.
const FIND_TABLE_AND_SEQUENCE = `SELECT to_regclass($1) IS NOT NULL AS table_present,
  to_regclass($2) IS NOT NULL AS sequence_present, to_regclass($3) IS NOT NULL AS candidates_present`;

// Each privilege on its own: has_table_privilege with a list answers true when any one is held.
const FIND_PRIVILEGES = `
  SELECT current_user AS role,
         has_table_privilege($1, 'SELECT') AND has_table_privilege($1, 'INSERT')
           AND has_table_privilege($1, 'UPDATE') AS table_ok,
         has_sequence_privilege($2, 'USAGE') AS sequence_ok`;

// Checked first because CREATE SCHEMA IF NOT EXISTS still needs CREATE on the database.
const SCHEMA_EXISTS = "SELECT to_regnamespace($1) IS NOT NULL AS present";

const INSUFFICIENT_PRIVILEGE = "42501";

const unquoted = (name: string) => name.replaceAll('"', "");

export class LeaseTableMissingError extends Error {
  constructor(t: LeaseTable, missing: "table" | "sequence" | "columns" | "candidates" = "table") {
    super(
      missing === "table"
        ? `lease table ${t.schema}.${t.table} does not exist and migrations are off: run \`pglease migrate\` ` +
            "(or start with --migrate) with a role allowed to create it"
        : missing === "sequence"
          ? `fence sequence ${unquoted(t.fenceSequence)} does not exist (the lease table was made by an older pglease): ` +
            "run `pglease migrate` once with a role allowed to create it, then GRANT USAGE ON SEQUENCE to the lease role"
          : missing === "candidates"
            ? `candidates table ${unquoted(t.candidates)} does not exist (the lease table was made by an older pglease): ` +
              "run `pglease migrate` once with a role allowed to create it"
            : `lease table ${t.schema}.${t.table} lacks columns of this version (${addedColumnNames.join(", ")}; made by an ` +
              "older pglease): run `pglease migrate` once as the table's owner",
    );
    this.name = "LeaseTableMissingError";
  }
}

/** Without it changes of hands would go unrecorded, silently: refuse to start instead. */
export class HistoryMissingError extends Error {
  constructor(t: LeaseTable, missing: readonly string[]) {
    super(
      `the history of lease table ${unquoted(t.qualified)} is incomplete (missing ${unquoted(missing.join(", "))}; ` +
        "the table was made by an older pglease) and migrations are off: run `pglease migrate` once " +
        "with a role allowed to create them (the table's owner)",
    );
    this.name = "HistoryMissingError";
  }
}

/** A claim would fail on every attempt without these: say so at start, with the GRANT that fixes it. */
async function assertPrivileges(client: Pick<pg.ClientBase, "query">, t: LeaseTable): Promise<void> {
  const { rows } = await client.query<{ role: string; table_ok: boolean; sequence_ok: boolean }>(
    FIND_PRIVILEGES,
    [t.qualified, t.fenceSequence],
  );
  const found = rows[0];
  if (!found) return;
  const missing = [
    found.table_ok
      ? null
      : ["SELECT, INSERT and UPDATE on the table", `GRANT SELECT, INSERT, UPDATE ON ${t.qualified}`],
    found.sequence_ok ? null : ["USAGE on its fence sequence", `GRANT USAGE ON SEQUENCE ${t.fenceSequence}`],
  ].filter((m): m is string[] => m !== null);
  if (missing.length === 0) return;
  throw new Error(
    `role ${found.role} cannot claim leases in ${unquoted(t.qualified)}: it lacks ` +
      `${missing.map(([lack]) => lack).join(" and ")}; run as the table's owner: ` +
      missing.map(([, grant]) => `${grant} TO "${found.role}"`).join("; "),
  );
}

async function findRelations(
  client: Pick<pg.ClientBase, "query">,
  t: LeaseTable,
): Promise<{ table_present: boolean; sequence_present: boolean; candidates_present: boolean }> {
  const { rows } = await client.query(FIND_TABLE_AND_SEQUENCE, [t.qualified, t.fenceSequence, t.candidates]);
  return rows[0] ?? { table_present: false, sequence_present: false, candidates_present: false };
}

async function addedColumnsPresent(client: Pick<pg.ClientBase, "query">, t: LeaseTable): Promise<boolean> {
  const { rows } = await client.query<{ present: boolean }>(FIND_ADDED_COLUMNS, [
    t.qualified,
    addedColumnNames,
  ]);
  return rows[0]?.present ?? false;
}

/**
 * A table made by an older pglease gets the newer columns, and the history's trigger function the
 * version that reads them (a handover's claim is recorded as such); only the owner may do both.
 */
async function addMissingColumns(client: Pick<pg.ClientBase, "query">, t: LeaseTable): Promise<void> {
  if (await addedColumnsPresent(client, t)) return;
  try {
    await client.query(addColumns(t));
    await client.query(createRecordFunction(t));
  } catch (error) {
    const denied = (error as { code?: string }).code === INSUFFICIENT_PRIVILEGE;
    throw denied ? new LeaseTableMissingError(t, "columns") : error;
  }
}

/**
 * A table with the fillfactor an earlier version made it with gets this one's, if this role owns
 * it; a value the operator set stays (a migration at every start would otherwise undo it).
 */
async function upgradeFillfactor(client: Pick<pg.ClientBase, "query">, t: LeaseTable): Promise<void> {
  const { rows } = await client.query<{ earlier: boolean; owned: boolean }>(FIND_FILLFACTOR, [t.qualified]);
  const found = rows[0];
  if (found?.earlier && found.owned) await client.query(setFillfactor(t));
}

/** Creates the lease table and its fence sequence if needed, in one transaction under the migration lock. */
export async function migrate(pool: pg.Pool, t: LeaseTable): Promise<void> {
  await inTransaction(pool, async (client) => {
    // Lease connections carry a statement timeout as short as the call timeout; replicas starting
    // together wait here for each other's migration, which may take longer. For this transaction only.
    await client.query(MIGRATION_TIMEOUTS);
    await client.query(LOCK, [MIGRATION_LOCK_ID]);
    const schema = await client.query<{ present: boolean }>(SCHEMA_EXISTS, [`"${t.schema}"`]);
    if (!schema.rows[0]?.present) await client.query(`CREATE SCHEMA IF NOT EXISTS "${t.schema}"`);
    // Checked first too: a role without CREATE on the schema may still use what exists.
    const found = await findRelations(client, t);
    if (!found.sequence_present) {
      await client.query(createFenceSequence(t)).catch((error: unknown) => {
        const denied = (error as { code?: string }).code === INSUFFICIENT_PRIVILEGE;
        throw denied && found.table_present ? new LeaseTableMissingError(t, "sequence") : error;
      });
      if (found.table_present) await client.query(continueAboveRows(t));
    }
    if (!found.table_present) await client.query(createTable(t));
    else {
      await addMissingColumns(client, t);
      await upgradeFillfactor(client, t);
    }
    await migrateHistory(client, t);
    if (!found.candidates_present) await client.query(createCandidatesTable(t));
    await assertPrivileges(client, t);
  });
}

/** For --no-migrate: fail early and clearly instead of on the first claim. */
export async function assertTablePresent(pool: pg.Pool, t: LeaseTable): Promise<void> {
  const found = await findRelations(pool, t);
  if (!found.table_present) throw new LeaseTableMissingError(t);
  if (!found.sequence_present) throw new LeaseTableMissingError(t, "sequence");
  const history = await missingHistory(pool, t);
  if (history.length > 0) throw new HistoryMissingError(t, history);
  if (!(await addedColumnsPresent(pool, t))) throw new LeaseTableMissingError(t, "columns");
  if (!found.candidates_present) throw new LeaseTableMissingError(t, "candidates");
  await assertPrivileges(pool, t);
}
