// Subcommand dispatch, help, and the exit-code contract: 0 ok, 2 bad usage or configuration
// (every problem listed), 1 runtime failure (one clear line, never a stack trace or a secret).
// `pglease run` writes JSON lines on stdout, so its fatal error is one too; the other commands
// write text, and their errors go to stderr. A reader that goes away ends a command quietly.
import { closestName, UsageError } from "../config/options.ts";
import { packageVersion as version } from "../observability/build-info.ts";
import { createLogger, scrub, secretsFrom } from "../observability/logger.ts";
import { explainDatabaseError } from "./database-errors.ts";

export const MAIN_HELP = `pglease: leader election for Kubernetes pods, backed by a lease row in PostgreSQL.

Usage: pglease COMMAND [flags]

Commands:
  run         campaign for leases, publish the role on the pod, serve probes and metrics
  status      show every lease: holder, fence, expiry
  history     show how leases changed hands: when, fence, holder, previous holder, reason
  candidates  show the processes campaigning for each lease: pod, priority, revision, live
  handover    move a lease's leadership to a live candidate, which claims first
  release     end the current term of a lease (an operator's forced release)
  migrate     create the lease table and exit
  demo        three replicas on an embedded PostgreSQL, leaders stopped on a schedule

Run 'pglease COMMAND --help' for the flags of a command; 'pglease --version' prints the version.

Examples:
  pglease demo
  DATABASE_URL=postgres://app:secret@db:5432/app pglease run --lease orders-sync
  pglease status --json
`;

type Command = (argv: readonly string[], env: NodeJS.ProcessEnv) => Promise<number>;

// Loaded on demand: `pglease status` should not pay for the Kubernetes client at start.
const COMMANDS: Record<string, () => Promise<{ run: Command; help: string }>> = {
  run: async () => {
    const m = await import("./run.ts");
    return { run: m.runCommand, help: m.RUN_HELP };
  },
  status: async () => {
    const m = await import("./status.ts");
    return { run: m.statusCommand, help: m.STATUS_HELP };
  },
  history: async () => {
    const m = await import("./history.ts");
    return { run: m.historyCommand, help: m.HISTORY_HELP };
  },
  candidates: async () => {
    const m = await import("./candidates.ts");
    return { run: m.candidatesCommand, help: m.CANDIDATES_HELP };
  },
  handover: async () => {
    const m = await import("./handover.ts");
    return { run: m.handoverCommand, help: m.HANDOVER_HELP };
  },
  release: async () => {
    const m = await import("./release.ts");
    return { run: m.releaseCommand, help: m.RELEASE_HELP };
  },
  migrate: async () => {
    const m = await import("./migrate.ts");
    return { run: m.migrateCommand, help: m.MIGRATE_HELP };
  },
  demo: async () => {
    const m = await import("./demo/command.ts");
    return { run: m.demoCommand, help: m.DEMO_HELP };
  },
};

export async function main(argv: readonly string[], env: NodeJS.ProcessEnv): Promise<number> {
  const [name, ...rest] = argv;
  if (name === undefined || name === "help" || name === "--help" || name === "-h") {
    process.stdout.write(MAIN_HELP);
    return name === undefined ? 2 : 0;
  }
  if (name === "--version" || name === "version") {
    process.stdout.write(`pglease ${await version()}\n`);
    return 0;
  }
  const load = COMMANDS[name];
  if (!load) {
    const meant = closestName(name, Object.keys(COMMANDS));
    process.stderr.write(
      `pglease: unknown command ${JSON.stringify(name)}${meant ? ` (did you mean ${meant}?)` : ""}; the commands are ${Object.keys(COMMANDS).join(", ")}\n`,
    );
    return 2;
  }
  const command = await load();
  if (rest.includes("--help") || rest.includes("-h")) {
    process.stdout.write(command.help);
    return 0;
  }
  endQuietlyWhenStdoutCloses(name);
  try {
    return await command.run(rest, env);
  } catch (error) {
    const secrets = secretsFrom(env);
    const usage = error instanceof UsageError;
    const where = { connectionString: env.DATABASE_URL?.trim() || undefined };
    if (name === "run") {
      // Where every other line of the sidecar goes, so a log collector sees why it stopped.
      const fatal = createLogger("fatal", secrets);
      if (usage)
        fatal.fatal({ problems: error.problems }, "invalid usage or configuration; see 'pglease run --help'");
      else fatal.fatal(explainDatabaseError(error, where).message);
      return usage ? 2 : 1;
    }
    if (usage) {
      const lines = error.problems.map((p) => `  - ${scrub(p, secrets)}`).join("\n");
      process.stderr.write(
        `pglease ${name}: invalid usage or configuration:\n${lines}\nSee 'pglease ${name} --help'.\n`,
      );
      return 2;
    }
    const { message } = explainDatabaseError(error, where);
    process.stderr.write(`pglease ${name}: ${scrub(message, secrets)}\n`);
    return 1;
  }
}

/** Commands with processes of their own to stop (run: demote and release; demo: its replicas). */
const STOP_ON_SIGTERM = new Set(["run", "demo"]);

/**
 * `pglease status --watch | head -2`: once the reader has gone, writing fails with EPIPE. A command
 * that only prints ends there, exit 0; run and demo stop as on SIGTERM, once.
 */
function endQuietlyWhenStdoutCloses(name: string): void {
  let closed = false;
  process.stdout.on("error", (error: NodeJS.ErrnoException) => {
    if (error.code !== "EPIPE" && !closed) throw error;
    if (closed) return;
    closed = true;
    if (STOP_ON_SIGTERM.has(name)) process.kill(process.pid, "SIGTERM");
    else process.exit(0);
  });
}
