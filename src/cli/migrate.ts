// `pglease migrate`: create (or upgrade) the lease table, then exit.
import { noArguments, optionHelp } from "../config/options.ts";
import { migrate } from "../postgres/migrate.ts";
import { databaseHelp, openDatabaseCommand } from "./database-command.ts";

export const MIGRATE_HELP = `Usage: pglease migrate [flags]

Creates the lease table if it does not exist, in one transaction serialized by an
advisory lock (safe to run from many replicas at once), then exits. Use it with a
privileged role when pglease run has --no-migrate.

Flags:
${optionHelp(databaseHelp())}

Example:
  DATABASE_URL=postgres://owner:secret@db:5432/app pglease migrate --schema ops
`;

export async function migrateCommand(argv: readonly string[], env: NodeJS.ProcessEnv): Promise<number> {
  const command = await openDatabaseCommand([], argv, env, (raw, problems) => {
    noArguments("migrate", raw, problems);
  });
  try {
    await migrate(command.pool, command.store.table);
    process.stdout.write(`lease table ${command.store.table.schema}.${command.store.table.table} is ready\n`);
    return 0;
  } finally {
    await command.close();
  }
}
