// `pglease status`: every lease in the table, readable in a terminal or as stable JSON.
import { setTimeout as delay } from "node:timers/promises";
import { type OptionSpec, optionHelp } from "../config/options.ts";
import { parseDuration } from "../config/values.ts";
import { holderCluster } from "../election/identity.ts";
import type { LeaseView } from "../election/ports.ts";
import { databaseHelp, openDatabaseCommand, textTable } from "./database-command.ts";
import { INSUFFICIENT_PRIVILEGE } from "./database-errors.ts";

const OPTIONS: readonly OptionSpec[] = [
  { flag: "json", boolean: true, help: "print JSON (stable field names, for scripts)" },
  { flag: "watch", boolean: true, help: "refresh until interrupted" },
  { flag: "interval", value: "DURATION", help: "refresh period with --watch", defaultText: "1s" },
];

export const STATUS_HELP = `Usage: pglease status [KEY ...] [--json] [--watch] [flags]

Shows every lease, or only the named ones: key, holder, fence, acquired, expires,
remaining, held or expired. A holder started with --cluster-name starts with it
(east/orders-0-1a2b3c4d: the leader runs in cluster east); --json has it as "cluster". Times come from the PostgreSQL server's clock. A named
lease that does not exist is reported on stderr and makes the exit code 1.

Flags:
${optionHelp([...OPTIONS, ...databaseHelp()])}

Examples:
  DATABASE_URL=postgres://app:secret@db:5432/app pglease status
  pglease status --json | jq '.leases[] | select(.state == "held")'
  pglease status --watch --interval 500ms
  pglease status orders-sync billing
`;

export interface LeaseStatusJson {
  key: string;
  holder: string;
  /** The cluster the holder identity names (`pglease run --cluster-name`); null when it names none. */
  cluster: string | null;
  fence: number;
  acquiredAt: string;
  expiresAt: string;
  remainingMs: number;
  state: "held" | "expired";
}

export function leaseJson(view: LeaseView): LeaseStatusJson {
  return {
    key: view.key,
    holder: view.holder,
    cluster: holderCluster(view.holder),
    fence: view.fence,
    acquiredAt: view.acquiredAt.toISOString(),
    expiresAt: view.expiresAt.toISOString(),
    remainingMs: Math.max(0, Math.round(view.ttlMs)),
    state: view.ttlMs > 0 ? "held" : "expired",
  };
}

export function leaseTableText(views: readonly LeaseView[]): string {
  if (views.length === 0) return "no leases yet\n";
  const rows = views.map((v) => {
    const j = leaseJson(v);
    return [
      j.key,
      j.holder,
      String(j.fence),
      j.acquiredAt,
      j.expiresAt,
      `${(j.remainingMs / 1000).toFixed(1)}s`,
      j.state,
    ];
  });
  const header = ["LEASE", "HOLDER", "FENCE", "ACQUIRED", "EXPIRES", "REMAINING", "STATE"];
  return textTable(header, rows);
}

export async function statusCommand(argv: readonly string[], env: NodeJS.ProcessEnv): Promise<number> {
  let interval = 1_000;
  const command = await openDatabaseCommand(OPTIONS, argv, env, (raw, problems) => {
    const text = raw.values.get("interval");
    if (text) {
      const parsed = parseDuration(text.text);
      if ("problem" in parsed) problems.push(`--interval: ${parsed.problem}`);
      else interval = parsed.value;
    }
  });
  const json = command.raw.values.get("json")?.text === "true";
  const watch = command.raw.values.get("watch")?.text === "true";
  const named = command.raw.positionals;
  let interrupted = false;
  const onSignal = () => {
    interrupted = true;
  };
  process.once("SIGINT", onSignal);
  try {
    let missing: string[] = [];
    do {
      const all = await command.store.list().catch((error: unknown) => {
        // Not the grants of pglease run, which writes: a read-only role needs SELECT only.
        if ((error as { code?: string }).code !== INSUFFICIENT_PRIVILEGE) throw error;
        throw new Error(
          `${(error as Error).message}: pglease status only reads the lease table; as its owner: GRANT SELECT ON ${command.store.table.qualified} TO <this role>`,
        );
      });
      const views = named.length === 0 ? all : all.filter((v) => named.includes(v.key));
      missing = named.filter((key) => !views.some((v) => v.key === key));
      const text = json ? `${JSON.stringify({ leases: views.map(leaseJson) })}\n` : leaseTableText(views);
      if (watch && !json && process.stdout.isTTY) process.stdout.write("\x1b[2J\x1b[H");
      process.stdout.write(text);
      for (const key of missing)
        process.stderr.write(`pglease status: no lease named ${JSON.stringify(key)}\n`);
      if (watch) await delay(interval);
    } while (watch && !interrupted);
    return missing.length > 0 ? 1 : 0;
  } finally {
    process.off("SIGINT", onSignal);
    await command.close();
  }
}
