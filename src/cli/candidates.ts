// `pglease candidates [KEY]`: every process campaigning for a lease, best first, readable in a
// terminal or as stable JSON. Live means it refreshed its row within its lease's liveness window.
import { type OptionSpec, optionHelp } from "../config/options.ts";
import type { Candidate } from "../postgres/candidates.ts";
import { CandidateStore } from "../postgres/candidates.ts";
import { databaseHelp, openDatabaseCommand, textTable } from "./database-command.ts";

const OPTIONS: readonly OptionSpec[] = [
  { flag: "json", boolean: true, help: "print JSON (stable field names, for scripts)" },
];

export const CANDIDATES_HELP = `Usage: pglease candidates [KEY] [--json] [flags]

Shows the processes campaigning for lease KEY (or for every lease), best first:
priority, then the longest campaigning. LEADS is "no" for a process in no-lead mode;
LIVE is "no" once a process stopped refreshing its row (it died, or lost the database),
and such rows are removed an hour later. A handover goes only to a live candidate
that leads.

Flags:
${optionHelp([...OPTIONS, ...databaseHelp()])}

Examples:
  pglease candidates orders-sync
  pglease candidates --json | jq '.candidates[] | select(.live)'
`;

export interface CandidateJson {
  key: string;
  holder: string;
  pod: string;
  priority: number;
  revision: string | null;
  leads: boolean;
  live: boolean;
  startedAt: string;
  seenAt: string;
}

export function candidateJson(c: Candidate): CandidateJson {
  return {
    key: c.key,
    holder: c.holder,
    pod: c.pod,
    priority: c.priority,
    revision: c.revision,
    leads: c.leads,
    live: c.live,
    startedAt: c.startedAt.toISOString(),
    seenAt: c.seenAt.toISOString(),
  };
}

function candidatesText(candidates: readonly Candidate[], leaders: ReadonlyMap<string, string>): string {
  if (candidates.length === 0) return "no candidates\n";
  const rows = candidates.map((c) => [
    c.key,
    c.pod,
    c.holder,
    String(c.priority),
    c.revision ?? "-",
    c.leads ? "yes" : "no",
    c.live ? "yes" : "no",
    leaders.get(c.key) === c.holder ? "leader" : "",
    c.seenAt.toISOString(),
  ]);
  return textTable(
    ["LEASE", "POD", "HOLDER", "PRIORITY", "REVISION", "LEADS", "LIVE", "ROLE", "LAST SEEN"],
    rows,
  );
}

export async function candidatesCommand(argv: readonly string[], env: NodeJS.ProcessEnv): Promise<number> {
  const command = await openDatabaseCommand(OPTIONS, argv, env, (raw, problems) => {
    if (raw.positionals.length > 1) {
      problems.push(
        `pglease candidates takes at most one lease name, got ${raw.positionals.length}: pglease candidates orders-sync`,
      );
    }
  });
  try {
    const key = command.raw.positionals[0] ?? null;
    const store = new CandidateStore(command.pool, command.store.table, 10_000);
    const candidates = await store.list(key);
    const leases = await command.store.list();
    const leaders = new Map(leases.filter((l) => l.ttlMs > 0).map((l) => [l.key, l.holder]));
    const json = command.raw.values.get("json")?.text === "true";
    process.stdout.write(
      json
        ? `${JSON.stringify({ candidates: candidates.map((c) => ({ ...candidateJson(c), leader: leaders.get(c.key) === c.holder })) })}\n`
        : candidatesText(candidates, leaders),
    );
    return 0;
  } finally {
    await command.close();
  }
}
