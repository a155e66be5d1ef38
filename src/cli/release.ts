// `pglease release KEY`: an operator ends whoever holds a lease now. The row keeps its fence,
// so the next claim still gets a higher one, and followers hear of it at once.
import { optionHelp } from "../config/options.ts";
import { databaseHelp, openDatabaseCommand } from "./database-command.ts";

export const RELEASE_HELP = `Usage: pglease release KEY [flags]

Ends the current term of lease KEY, whoever holds it. The fence is kept, so the
next claim gets a higher one; followers listening for releases claim at once.
The former holder finds out at its next renew (zero rows) and steps down.

Flags:
${optionHelp(databaseHelp())}

Example:
  pglease release orders-sync
`;

export async function releaseCommand(argv: readonly string[], env: NodeJS.ProcessEnv): Promise<number> {
  let key = "";
  const command = await openDatabaseCommand([], argv, env, (raw, problems) => {
    if (raw.positionals.length !== 1) {
      problems.push(
        `pglease release takes exactly one lease name, got ${raw.positionals.length}: pglease release orders-sync`,
      );
    }
    key = raw.positionals[0] ?? "";
  });
  try {
    const ended = await command.store.forceRelease(key);
    if (ended) {
      process.stdout.write(
        `released lease ${key} held by ${ended.holder} (fence ${ended.fence}); the next claim gets a higher fence\n`,
      );
    } else {
      process.stdout.write(`lease ${key} was not held: nothing to release\n`);
    }
    return 0;
  } finally {
    await command.close();
  }
}
