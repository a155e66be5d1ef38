// What status, release and migrate share: their flags, and the lease store from the composition
// root on a one-connection pool, with the same TLS settings as `pglease run`.
import { DATABASE_OPTIONS, readDatabaseConfig } from "../config/database.ts";
import { type OptionSpec, type RawOptions, readOptions, UsageError } from "../config/options.ts";
import { connectLeaseStore, type Leases } from "../leases/open-leases.ts";

export interface DatabaseCommand {
  raw: RawOptions;
  store: Leases["store"];
  pool: Awaited<ReturnType<typeof connectLeaseStore>>["pool"];
  close(): Promise<void>;
}

export async function openDatabaseCommand(
  extra: readonly OptionSpec[],
  argv: readonly string[],
  env: NodeJS.ProcessEnv,
  validate: (raw: RawOptions, problems: string[]) => void,
): Promise<DatabaseCommand> {
  const raw = readOptions([...DATABASE_OPTIONS, ...extra], argv, env);
  const problems = [...raw.problems];
  const database = readDatabaseConfig(raw, env, problems);
  validate(raw, problems);
  if (problems.length > 0) throw new UsageError(problems);
  const { store, pool, close } = await connectLeaseStore({
    connectionString: database.connectionString,
    ...(database.ssl !== undefined ? { ssl: database.ssl } : {}),
    poolSize: 1,
    applicationName: "pglease-cli",
    schema: database.schema,
    table: database.table,
    statementTimeoutMs: 10_000,
    preparedStatements: database.preparedStatements,
    serverTimeouts: database.serverTimeouts,
  });
  return { raw, store, pool, close };
}

export function databaseHelp(): readonly OptionSpec[] {
  return DATABASE_OPTIONS;
}

/** Columns padded to their widest cell, two spaces apart, as `kubectl get` prints them. */
export function textTable(header: string[], rows: string[][]): string {
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] ?? "").length)));
  const line = (cells: string[]) =>
    cells
      .map((c, i) => c.padEnd(widths[i] ?? 0))
      .join("  ")
      .trimEnd();
  return `${[line(header), ...rows.map(line)].join("\n")}\n`;
}
