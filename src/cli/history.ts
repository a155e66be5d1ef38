// `pglease history`: who held each lease, and why it changed hands, from the history table the
// lease table's triggers write. Times are the database server's.
import { type OptionSpec, optionHelp } from "../config/options.ts";
import { parseDuration, parseInteger } from "../config/values.ts";
import { type HistoryEntry, readHistory } from "../postgres/history-store.ts";
import { databaseHelp, openDatabaseCommand, textTable } from "./database-command.ts";
import { INSUFFICIENT_PRIVILEGE } from "./database-errors.ts";

const OPTIONS: readonly OptionSpec[] = [
  {
    flag: "since",
    value: "DURATION",
    help: "only changes at most this old (by the server's clock): 90m, 2h, 7d",
  },
  { flag: "limit", value: "N", help: "the newest N changes at most", defaultText: "100" },
  { flag: "json", boolean: true, help: "print JSON (stable field names, for scripts)" },
];

export const HISTORY_HELP = `Usage: pglease history [KEY] [--since DURATION] [--json] [flags]

Shows how leases changed hands, oldest first: when (the database server's time), the
lease, the fence of the term, the holder after the change, the holder before it, and
the reason: claim, expiry-takeover, restart-takeover, session-takeover, crash-takeover, new-term, release,
forced-release, deleted.
A term that ended (release) has no holder after it. Renewals are not changes.

Flags:
${optionHelp([...OPTIONS, ...databaseHelp()])}

Examples:
  pglease history orders-sync --since 2h
  pglease history --json | jq '.history[] | select(.reason == "expiry-takeover")'
`;

export interface HistoryEntryJson {
  key: string;
  fence: number;
  holder: string | null;
  previousHolder: string | null;
  reason: string;
  changedAt: string;
}

export function historyJson(entry: HistoryEntry): HistoryEntryJson {
  return {
    key: entry.key,
    fence: entry.fence,
    holder: entry.holder,
    previousHolder: entry.previousHolder,
    reason: entry.reason,
    changedAt: entry.changedAt.toISOString(),
  };
}

export function historyText(entries: readonly HistoryEntry[]): string {
  if (entries.length === 0) return "no changes of hands recorded\n";
  const header = ["TIME", "LEASE", "FENCE", "HOLDER", "PREVIOUS", "REASON"];
  const rows = entries.map((e) => [
    e.changedAt.toISOString(),
    e.key,
    String(e.fence),
    e.holder ?? "-",
    e.previousHolder ?? "-",
    e.reason,
  ]);
  return textTable(header, rows);
}

export async function historyCommand(argv: readonly string[], env: NodeJS.ProcessEnv): Promise<number> {
  let sinceMs: number | undefined;
  let limit = 100;
  const command = await openDatabaseCommand(OPTIONS, argv, env, (raw, problems) => {
    if (raw.positionals.length > 1) {
      problems.push(
        `pglease history takes at most one lease name, got ${raw.positionals.length}: pglease history orders-sync`,
      );
    }
    const since = raw.values.get("since")?.text;
    if (since !== undefined) {
      const parsed = parseDuration(since);
      if ("problem" in parsed) problems.push(`--since: ${parsed.problem}`);
      else sinceMs = parsed.value;
    }
    const limitText = raw.values.get("limit")?.text;
    if (limitText !== undefined) {
      const parsed = parseInteger(limitText, 1, 100_000);
      if ("problem" in parsed) problems.push(`--limit: ${parsed.problem}`);
      else limit = parsed.value;
    }
  });
  try {
    const key = command.raw.positionals[0];
    const table = command.store.table;
    const entries = await readHistory(command.pool, table, {
      ...(key !== undefined ? { key } : {}),
      ...(sinceMs !== undefined ? { sinceMs } : {}),
      limit,
    }).catch((error: unknown) => {
      // The lease role needs no privilege on the history: say which grant reading it takes.
      if ((error as { code?: string }).code !== INSUFFICIENT_PRIVILEGE) throw error;
      throw new Error(
        `${(error as Error).message}: reading the history needs SELECT on it; as its owner: GRANT SELECT ON ${table.history.table} TO <this role>`,
      );
    });
    const json = command.raw.values.get("json")?.text === "true";
    process.stdout.write(
      json ? `${JSON.stringify({ history: entries.map(historyJson) })}\n` : historyText(entries),
    );
    return 0;
  } finally {
    await command.close();
  }
}
