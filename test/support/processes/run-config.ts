// Reading `pglease run`'s configuration in tests: the problems a command line is refused with
// (none when it is accepted), and a database environment that is never dialled.
import { UsageError } from "../../../src/config/options.ts";
import { readRunConfig } from "../../../src/config/run-config.ts";

export const NO_DIAL_DATABASE = { DATABASE_URL: "postgres://app:pw@db:5432/app" };

export function runConfigProblems(argv: string[], env: NodeJS.ProcessEnv): string[] {
  try {
    readRunConfig(argv, env);
    return [];
  } catch (error) {
    if (error instanceof UsageError) return error.problems;
    throw error;
  }
}
