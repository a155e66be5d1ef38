// The demo's replicas: child processes each running the real `pglease run`, started, stopped
// with a chosen signal, restarted under the same name (a new process is a new holder), and all
// stopped at the end within a bound.
import { type ChildProcess, spawn } from "node:child_process";
import { extname } from "node:path";
import { createInterface } from "node:readline";
import type { Readable } from "node:stream";
import { fileURLToPath } from "node:url";

// cmd/pglease.ts from source, dist/cmd/pglease.js once compiled: the same relative place.
const HERE = fileURLToPath(import.meta.url);
export const PGLEASE_ENTRY = fileURLToPath(new URL(`../../../cmd/pglease${extname(HERE)}`, import.meta.url));

const READY_TIMEOUT_MS = 30_000;
const STDERR_LINES_KEPT = 5;

export interface ReplicaSettings {
  databaseUrl: string;
  lease: string;
  durationMs: number;
  retryIntervalMs: number;
  gracePeriodMs: number;
  env: NodeJS.ProcessEnv;
}

export interface Exit {
  code: number | null;
  signal: NodeJS.Signals | null;
}

export interface Replica {
  name: string;
  pid: number;
  /** The holder identity it campaigns as, from its first log line. */
  holder: string | null;
  httpPort: number | null;
  lastTransition: { outcome: string; message: string; at: number } | null;
  /** Set once the demo has asked it to stop, so its exit is not a failure. */
  stopSignal: NodeJS.Signals | null;
  exited: Promise<Exit>;
  child: ChildProcess;
}

export interface ReplicaListener {
  started(replica: Replica, restarted: boolean): void;
  transition(replica: Replica): void;
  /** A replica ended without being asked to: the demo cannot go on honestly. */
  failed(replica: Replica, reason: string): void;
}

interface LogLine {
  msg?: unknown;
  holder?: unknown;
  http?: unknown;
  outcome?: unknown;
}

function childEnv(settings: ReplicaSettings, name: string): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const [key, value] of Object.entries(settings.env)) {
    // The replicas take their settings from the demo's flags only, and never publish to a cluster.
    if (key.startsWith("PGLEASE_") || key.startsWith("KUBERNETES_")) continue;
    if (key === "POD_NAMESPACE" || key === "KUBECONFIG") continue;
    env[key] = value;
  }
  return { ...env, DATABASE_URL: settings.databaseUrl, POD_NAME: name, NODE_NO_WARNINGS: "1" };
}

function exitText(exit: Exit): string {
  return exit.signal ? `signal ${exit.signal}` : `code ${exit.code}`;
}

export class ReplicaGroup {
  readonly #settings: ReplicaSettings;
  readonly #listener: ReplicaListener;
  readonly #slots: Replica[] = [];
  /** Every process started, in order, for the report and the leak checks. */
  readonly started: Array<{ name: string; pid: number }> = [];

  constructor(settings: ReplicaSettings, listener: ReplicaListener) {
    this.#settings = settings;
    this.#listener = listener;
  }

  get replicas(): readonly Replica[] {
    return this.#slots;
  }

  byHolder(holder: string): Replica | undefined {
    return this.#slots.find((r) => r.holder === holder);
  }

  async startAll(count: number): Promise<void> {
    const names = Array.from({ length: count }, (_, i) => `replica-${i + 1}`);
    const results = await Promise.allSettled(names.map((name, i) => this.#start(name, i, false)));
    const failure = results.find((r): r is PromiseRejectedResult => r.status === "rejected");
    if (failure) throw failure.reason;
  }

  /** Sends the signal; resolves when the process has exited. */
  stop(replica: Replica, signal: NodeJS.Signals): Promise<Exit> {
    replica.stopSignal ??= signal;
    if (replica.child.exitCode === null && replica.child.signalCode === null) replica.child.kill(signal);
    return replica.exited;
  }

  /** A new process in the stopped one's place, under the same name. */
  async restart(replica: Replica): Promise<Replica> {
    await this.stop(replica, "SIGKILL");
    const slot = this.#slots.indexOf(replica);
    return this.#start(replica.name, slot < 0 ? this.#slots.length : slot, true);
  }

  /** SIGTERM to every replica, SIGKILL to those still running after boundMs. */
  async stopAll(boundMs: number): Promise<void> {
    const all = [...this.#slots];
    const exits = Promise.all(all.map((r) => this.stop(r, "SIGTERM")));
    const timer = setTimeout(() => this.killAll(), boundMs);
    try {
      await exits;
    } finally {
      clearTimeout(timer);
    }
  }

  killAll(): void {
    for (const replica of this.#slots) void this.stop(replica, "SIGKILL");
  }

  #start(name: string, slot: number, restarted: boolean): Promise<Replica> {
    const child = spawn(process.execPath, [PGLEASE_ENTRY, ...runArgs(this.#settings)], {
      env: childEnv(this.#settings, name),
      stdio: ["ignore", "pipe", "pipe"],
    });
    const exited = new Promise<Exit>((resolve) => {
      child.once("exit", (code, signal) => resolve({ code, signal }));
      // A spawn failure emits 'error' and may never emit 'exit'.
      child.once("error", () => resolve({ code: null, signal: null }));
    });
    const replica: Replica = {
      name,
      pid: child.pid ?? -1,
      holder: null,
      httpPort: null,
      lastTransition: null,
      stopSignal: null,
      exited,
      child,
    };
    this.#slots[slot] = replica;
    this.started.push({ name, pid: replica.pid });
    return this.#untilCampaigning(replica, restarted, child.stdout, lastLines(child.stderr));
  }

  /** Resolves when the replica logs its HTTP address (it campaigns); rejects if it dies first. */
  #untilCampaigning(
    replica: Replica,
    restarted: boolean,
    stdout: Readable,
    stderr: string[],
  ): Promise<Replica> {
    const { name, exited } = replica;
    return new Promise<Replica>((resolve, reject) => {
      let ready = false;
      const timer = setTimeout(() => {
        void this.stop(replica, "SIGKILL");
        reject(new Error(`${name} (pid ${replica.pid}) was not campaigning within ${READY_TIMEOUT_MS} ms`));
      }, READY_TIMEOUT_MS);
      createInterface({ input: stdout }).on("line", (text) => {
        const line = parseLogLine(text);
        if (!line) return;
        if (typeof line.holder === "string") replica.holder ??= line.holder;
        if (typeof line.outcome === "string" && typeof line.msg === "string") {
          replica.lastTransition = { outcome: line.outcome, message: line.msg, at: performance.now() };
          this.#listener.transition(replica);
        }
        if (!ready && typeof line.http === "string") {
          ready = true;
          replica.httpPort = Number(line.http.slice(line.http.lastIndexOf(":") + 1));
          clearTimeout(timer);
          this.#listener.started(replica, restarted);
          resolve(replica);
        }
      });
      void exited.then(async (exit) => {
        clearTimeout(timer);
        if (ready && replica.stopSignal !== null) return;
        // Let the last lines of stderr arrive: they usually say why.
        await new Promise((r) => setTimeout(r, 50));
        const why = replica.stopSignal
          ? `stopped with ${replica.stopSignal}`
          : (stderr.at(-1) ?? "no message");
        const reason = `${name} (pid ${replica.pid}) exited with ${exitText(exit)}`;
        if (ready) this.#listener.failed(replica, `${reason}: ${why}`);
        else reject(new Error(`${reason} before it was ready: ${why}`));
      });
    });
  }
}

function runArgs(s: ReplicaSettings): string[] {
  return [
    "run",
    "--lease",
    s.lease,
    "--http-addr",
    "127.0.0.1:0",
    "--duration",
    `${s.durationMs}ms`,
    "--retry-interval",
    `${s.retryIntervalMs}ms`,
    "--grace-period",
    `${s.gracePeriodMs}ms`,
    "--log-level",
    "info",
  ];
}

/** The last lines a child wrote to stderr, kept to say why it exited. */
function lastLines(stream: Readable): string[] {
  const lines: string[] = [];
  stream.setEncoding("utf8");
  createInterface({ input: stream }).on("line", (line) => {
    lines.push(line);
    if (lines.length > STDERR_LINES_KEPT) lines.shift();
  });
  return lines;
}

function parseLogLine(text: string): LogLine | null {
  if (!text.startsWith("{")) return null;
  try {
    return JSON.parse(text) as LogLine;
  } catch {
    return null;
  }
}
