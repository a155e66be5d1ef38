// `node test/chaos/run.ts --seed S --duration D [--replicas N]`: one chaos run, its summary as a
// table (or JSON with --json), exit 1 on any violation, 0 otherwise, 130 when interrupted, 2 on
// bad usage. Ctrl-C stops it cleanly; a second Ctrl-C kills every child at once.
import { writeFile } from "node:fs/promises";
import { parseArgs } from "node:util";
import { parseDuration } from "../../src/config/values.ts";
import { ChaosInterrupted, runChaos } from "./chaos-run.ts";
import { killAllNow } from "./processes.ts";
import { formatSummary, summarize } from "./report.ts";
import {
  CRASH_FAULT_KINDS,
  FAILOVER_FAULT_KINDS,
  FAULT_KINDS,
  type FaultKind,
  SESSION_FAULT_KINDS,
} from "./schedule.ts";

const USAGE = `Usage: node test/chaos/run.ts --seed S --duration D [--replicas N] [flags]

  --seed S          PRNG seed: the same seed plays the same fault schedule (default 1)
  --duration D      length of the fault phase, e.g. 90s, 10m (default 90s)
  --replicas N      pglease replicas, each with its workload and fault proxies (default 3)
  --lease D         lease duration of the replicas (default 2s; renew a third of it, retry 200ms)
  --faults K,K      only these kinds (${FAULT_KINDS.join(", ")};
                    with --failover also ${FAILOVER_FAULT_KINDS.join(", ")}, its default;
                    with --session-takeover also ${SESSION_FAULT_KINDS.join(", ")}, added to the default;
                    with --crash-takeover also ${CRASH_FAULT_KINDS.join(", ")}, added to the default)
  --failover MODE   the database is a primary with a streaming standby behind a proxy that follows
                    failovers, replicating sync (every commit waits for the standby) or async
  --session-takeover  the sidecars run with --session-takeover: a follower takes a live term once
                    its holder's recorded session is gone (the README's window is judged)
  --crash-takeover  the sidecars run with --crash-takeover: a follower takes a live term once the
                    kubelet reports its holder's sidecar terminated (leader-crash-reported)
  --api-server S    auto (default: the real kube-apiserver when built, else in-process), real, in-process
  --wake-grace D    how long a process woken from a pause may still believe it leads (default 200ms)
  --unguarded       the deliberately unsafe variant: workloads write without the fence guard
  --json            print the summary as JSON instead of a table
  --history FILE    also write the whole recorded history (the checker's input) to FILE`;

function fail(problem: string): never {
  process.stderr.write(`chaos: ${problem}\n\n${USAGE}\n`);
  process.exit(2);
}

function duration(flag: string, text: string): number {
  const parsed = parseDuration(text);
  if ("problem" in parsed) fail(`--${flag}: ${parsed.problem}`);
  return parsed.value;
}

let args: ReturnType<typeof parse>;
function parse() {
  return parseArgs({
    options: {
      seed: { type: "string", default: "1" },
      duration: { type: "string", default: "90s" },
      replicas: { type: "string", default: "3" },
      lease: { type: "string", default: "2s" },
      faults: { type: "string" },
      unguarded: { type: "boolean", default: false },
      failover: { type: "string" },
      "session-takeover": { type: "boolean", default: false },
      "crash-takeover": { type: "boolean", default: false },
      "api-server": { type: "string", default: "auto" },
      "wake-grace": { type: "string", default: "200ms" },
      json: { type: "boolean", default: false },
      history: { type: "string" },
      help: { type: "boolean", default: false },
    },
    strict: true,
  }).values;
}
try {
  args = parse();
} catch (error) {
  fail((error as Error).message);
}
if (args.help) {
  process.stdout.write(`${USAGE}\n`);
  process.exit(0);
}
const replicas = Number(args.replicas);
if (!Number.isInteger(replicas) || replicas < 2 || replicas > 9)
  fail(`--replicas: "${args.replicas}" must be a whole number from 2 to 9`);
const oneOf = <T extends string>(flag: string, value: string, allowed: readonly T[]): T => {
  if (!(allowed as readonly string[]).includes(value))
    fail(`--${flag}: "${value}" must be ${allowed.join(" or ")}`);
  return value as T;
};
const failover =
  args.failover === undefined ? undefined : oneOf("failover", args.failover, ["sync", "async"]);
const apiServer = oneOf("api-server", args["api-server"], ["auto", "real", "in-process"]);
const kinds = args.faults?.split(",").map((k) => k.trim());
const sessionTakeover = args["session-takeover"];
const crashTakeover = args["crash-takeover"];
const known: readonly string[] = [
  ...FAULT_KINDS,
  ...(failover ? FAILOVER_FAULT_KINDS : []),
  ...(sessionTakeover ? SESSION_FAULT_KINDS : []),
  ...(crashTakeover ? CRASH_FAULT_KINDS : []),
];
const unknown = kinds?.filter((k) => !known.includes(k)) ?? [];
if (unknown.length)
  fail(
    `--faults: unknown kind(s) ${unknown.join(", ")} (the pg-failover kinds need --failover sync|async, ${SESSION_FAULT_KINDS.join(" and ")} need --session-takeover, ${CRASH_FAULT_KINDS.join(" and ")} needs --crash-takeover)`,
  );
const options = {
  seed: args.seed,
  durationMs: duration("duration", args.duration),
  replicas,
  leaseMs: duration("lease", args.lease),
  retryMs: 200,
  guarded: !args.unguarded,
  ...(failover ? { failover } : {}),
  ...(sessionTakeover ? { sessionTakeover } : {}),
  ...(crashTakeover ? { crashTakeover } : {}),
  apiServer,
  check: { wakeGraceMs: duration("wake-grace", args["wake-grace"]) },
  ...(kinds ? { kinds: kinds as FaultKind[] } : {}),
};

const abort = new AbortController();
let interrupts = 0;
const onSignal = (name: NodeJS.Signals) => {
  interrupts++;
  if (interrupts > 1) {
    process.stderr.write(`chaos: second ${name}: killing every child now\n`);
    killAllNow();
    process.exit(130);
  }
  process.stderr.write(`chaos: ${name}: healing, stopping every process and removing temporary files…\n`);
  abort.abort();
};
process.on("SIGINT", onSignal);
process.on("SIGTERM", onSignal);
// A bug in the harness must not leave processes or folders behind: stop as on Ctrl-C, then fail.
let crashed: unknown = null;
const onCrash = (error: unknown) => {
  crashed ??= error;
  process.exitCode = 1;
  process.stderr.write(`chaos: internal error, stopping: ${(error as Error)?.stack ?? error}\n`);
  abort.abort();
};
process.on("uncaughtException", onCrash);
process.on("unhandledRejection", onCrash);

try {
  const outcome = await runChaos({
    ...options,
    signal: abort.signal,
    progress: (line) => process.stderr.write(`chaos: ${line}\n`),
  });
  const summary = summarize(options, outcome);
  if (args.history) await writeFile(args.history, `${JSON.stringify(outcome.history)}\n`);
  process.stdout.write(args.json ? `${JSON.stringify(summary, null, 2)}\n` : `${formatSummary(summary)}\n`);
  process.exitCode = summary.violations.length > 0 ? 1 : 0;
} catch (error) {
  if (crashed !== null) {
    process.exitCode = 1;
  } else if (abort.signal.aborted) {
    process.stderr.write(`chaos: ${new ChaosInterrupted().message}\n`);
    process.exitCode = 130;
  } else {
    process.stderr.write(`chaos: failed: ${(error as Error).stack ?? error}\n`);
    process.exitCode = 1;
  }
}
