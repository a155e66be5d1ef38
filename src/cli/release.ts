// `pglease release KEY`: an operator ends whoever holds a lease now. The row keeps its fence,
// so the next claim still gets a higher one, and followers hear of it at once.
import { closestName, optionHelp } from "../config/options.ts";
import { databaseHelp, openDatabaseCommand } from "./database-command.ts";

export const RELEASE_HELP = `Usage: pglease release KEY [flags]

Ends the current term of lease KEY, whoever holds it. The fence is kept, so the
next claim gets a higher one; followers listening for releases claim at once.
The former holder finds out at its next renew (zero rows) and steps down.

Exit codes: 0 released, or the lease exists but nobody held it; 1 no lease has that
name (a typo: the nearest name is suggested) or the database failed; 2 bad usage.

Flags:
${optionHelp(databaseHelp())}

Example:
  pglease release orders-sync
`;

export async function releaseCommand(argv: readonly string[], env: NodeJS.ProcessEnv): Promise<number> {
  let key = "";
  const command = await openDatabaseCommand([], argv, env, (raw, problems) => {
    // A misspelt flag may have been taken to carry the name: it is the one problem then.
    if (raw.positionals.length !== 1 && raw.misspelt.size === 0) {
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
      return 0;
    }
    // A lease with no row is most likely a typo: it must not look like success.
    const keys = (await command.store.list()).map((v) => v.key);
    if (!keys.includes(key)) {
      const meant = closestName(key, keys);
      const guess = meant ? ` (did you mean ${meant}?)` : "";
      process.stderr.write(
        `pglease release: no lease named ${JSON.stringify(key)}${guess}; see pglease status\n`,
      );
      return 1;
    }
    process.stdout.write(`lease ${key} was not held: nothing to release\n`);
    return 0;
  } finally {
    await command.close();
  }
}
