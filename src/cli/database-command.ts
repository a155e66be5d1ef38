// What status, release and migrate share: their flags, and a store on a small pool.
import { DATABASE_OPTIONS, readDatabaseConfig } from "../config/database.ts";
import { type OptionSpec, type RawOptions, readOptions, UsageError } from "../config/options.ts";
import { createLeasePool } from "../lease/pool.ts";
import { PgLeaseStore } from "../lease/store.ts";

export interface DatabaseCommand {
  raw: RawOptions;
  store: PgLeaseStore;
  pool: ReturnType<typeof createLeasePool>;
  close(): Promise<void>;
}

export function openDatabaseCommand(
  extra: readonly OptionSpec[],
  argv: readonly string[],
  env: NodeJS.ProcessEnv,
  validate: (raw: RawOptions, problems: string[]) => void,
): DatabaseCommand {
  const raw = readOptions([...DATABASE_OPTIONS, ...extra], argv, env);
  const problems = [...raw.problems];
  const database = readDatabaseConfig(raw, env, problems);
  validate(raw, problems);
  if (problems.length > 0) throw new UsageError(problems);
  const pool = createLeasePool({
    connectionString: database.connectionString,
    max: 1,
    applicationName: "pglease-cli",
  });
  const store = new PgLeaseStore({
    pool,
    schema: database.schema,
    table: database.table,
    statementTimeoutMs: 10_000,
    preparedStatements: database.preparedStatements,
  });
  return { raw, store, pool, close: () => pool.end() };
}

export function databaseHelp(): readonly OptionSpec[] {
  return DATABASE_OPTIONS;
}
