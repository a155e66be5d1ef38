// The demo's flags, read and validated at once: every problem reported together (exit 2).
import {
  noArguments,
  type OptionSpec,
  optionHelp,
  optionReader,
  readOptions,
  UsageError,
} from "../../config/options.ts";
import { parseBoolean, parseDuration, parseInteger } from "../../config/values.ts";
import { resolveTiming } from "../../election/timing.ts";

/** Rounds run when the output is not a terminal and --rounds is not given: two of each kind. */
const DEFAULT_ROUNDS_OFF_TTY = 4;
const MIN_DURATION_MS = 1_000;

const OPTIONS: readonly OptionSpec[] = [
  { flag: "replicas", value: "N", help: "replicas competing for the lease, 2 to 9", defaultText: "3" },
  {
    flag: "duration",
    value: "DURATION",
    help: "lease duration; replicas renew at a third of it and retry every 500ms",
    defaultText: "3s",
  },
  { flag: "interval", value: "DURATION", help: "pause before each stop of the leader", defaultText: "5s" },
  {
    flag: "rounds",
    value: "N",
    help: "stop the leader N times, print a summary and exit",
    defaultText: `live view until Ctrl-C on a terminal, else ${DEFAULT_ROUNDS_OFF_TTY}`,
  },
  { flag: "json", boolean: true, help: "print the summary as JSON (event lines go to stderr)" },
  {
    flag: "database-url",
    env: "DATABASE_URL",
    value: "URL",
    help: "an existing PostgreSQL to use (postgres://USER:PASSWORD@HOST:5432/DATABASE)",
    defaultText: "an embedded PostgreSQL in a temporary folder",
  },
];

export const DEMO_OPTIONS_HELP = optionHelp(OPTIONS);

export interface DemoOptions {
  replicas: number;
  durationMs: number;
  renewIntervalMs: number;
  intervalMs: number;
  /** Null: not given. */
  rounds: number | null;
  defaultRounds: number;
  json: boolean;
  databaseUrl: string | undefined;
}

/** Throws UsageError listing every problem. */
export function readDemoOptions(
  argv: readonly string[],
  env: NodeJS.ProcessEnv,
  retryIntervalMs: number,
): DemoOptions {
  const raw = readOptions(OPTIONS, argv, env);
  const problems = [...raw.problems];
  noArguments("demo", raw, problems);
  const get = optionReader(raw, problems);

  const replicas = get("replicas", (t) => parseInteger(t, 2, 9)) ?? 3;
  const durationMs = get("duration", parseDuration) ?? 3_000;
  const intervalMs = get("interval", parseDuration) ?? 5_000;
  const rounds = get("rounds", (t) => parseInteger(t, 1, 10_000)) ?? null;
  const json = get("json", parseBoolean) ?? false;
  if (json && rounds === null) {
    problems.push("--json needs --rounds N: the live view has no JSON form");
  }
  const timing = resolveTiming({ leaseDurationMs: durationMs, retryIntervalMs }, () => "--duration");
  if (durationMs < MIN_DURATION_MS || timing.problems.length > 0) {
    problems.push(
      `--duration ${durationMs} ms is too short: followers look every ${retryIntervalMs} ms; use ${MIN_DURATION_MS / 1000}s or more`,
    );
  }

  const url = raw.values.get("database-url");
  const databaseUrl = url?.text.trim() || undefined;
  if (url && databaseUrl !== undefined && !isPostgresUrl(databaseUrl)) {
    problems.push(
      `${url.source} is not a postgres:// URL (its value is not shown: it may hold a password); ` +
        "use postgres://USER:PASSWORD@HOST:5432/DATABASE",
    );
  }
  if (problems.length > 0) throw new UsageError(problems);
  return {
    replicas,
    durationMs,
    renewIntervalMs: timing.timing.renewIntervalMs,
    intervalMs,
    rounds,
    defaultRounds: DEFAULT_ROUNDS_OFF_TTY,
    json,
    databaseUrl,
  };
}

function isPostgresUrl(url: string): boolean {
  try {
    const protocol = new URL(url).protocol;
    return protocol === "postgres:" || protocol === "postgresql:";
  } catch {
    return false;
  }
}
