// `npm run docs:reference [-- --check]`: writes what each command prints for `--help` into
// docs/reference.md (between <!-- help:COMMAND --> and <!-- /help:COMMAND -->), so the reference
// lists every flag, its variable and its default from the definitions the commands read them
// with. --check writes nothing and exits 1 when the page differs (test/docs/reference.test.ts
// fails then too).
import { readFile, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { parseArgs } from "node:util";
import { CANDIDATES_HELP } from "../src/cli/candidates.ts";
import { DEMO_HELP } from "../src/cli/demo/command.ts";
import { HANDOVER_HELP } from "../src/cli/handover.ts";
import { HISTORY_HELP } from "../src/cli/history.ts";
import { MIGRATE_HELP } from "../src/cli/migrate.ts";
import { RELEASE_HELP } from "../src/cli/release.ts";
import { RUN_HELP } from "../src/cli/run.ts";
import { STATUS_HELP } from "../src/cli/status.ts";

export const REFERENCE_PAGE = "docs/reference.md";

const HELP: Record<string, string> = {
  run: RUN_HELP,
  status: STATUS_HELP,
  history: HISTORY_HELP,
  candidates: CANDIDATES_HELP,
  handover: HANDOVER_HELP,
  release: RELEASE_HELP,
  migrate: MIGRATE_HELP,
  demo: DEMO_HELP,
};

/** `page` with every help region rewritten; a region naming no command is an error. */
export function withHelp(page: string): string {
  return page.replace(/<!-- help:([a-z]+) -->[\s\S]*?<!-- \/help:\1 -->/g, (_region, command: string) => {
    const help = HELP[command];
    if (help === undefined) throw new Error(`${REFERENCE_PAGE}: no command ${command} for a help region`);
    return `<!-- help:${command} -->\n\`\`\`text\n${help.trimEnd()}\n\`\`\`\n<!-- /help:${command} -->`;
  });
}

/** The commands whose help the page holds, in order. */
export function helpRegions(page: string): string[] {
  return [...page.matchAll(/<!-- help:([a-z]+) -->/g)].map((m) => m[1] as string);
}

export const COMMANDS = Object.keys(HELP);

async function main(): Promise<number> {
  const { values } = parseArgs({ options: { check: { type: "boolean", default: false } }, strict: true });
  const path = join(import.meta.dirname, "..", REFERENCE_PAGE);
  const current = await readFile(path, "utf8");
  const generated = withHelp(current);
  if (current === generated) return 0;
  if (values.check) {
    console.error(`${REFERENCE_PAGE} differs from the commands' --help: run npm run docs:reference`);
    return 1;
  }
  await writeFile(path, generated);
  console.log(`rewrote ${REFERENCE_PAGE}`);
  return 0;
}

if (import.meta.main) {
  main().then(
    (code) => {
      process.exitCode = code;
    },
    (error: unknown) => {
      console.error(`docs:reference failed: ${error instanceof Error ? error.message : String(error)}`);
      process.exitCode = 2;
    },
  );
}
