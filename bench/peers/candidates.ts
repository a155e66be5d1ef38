// Election candidates as child processes, one per "pod", the way they run for real: the real
// `pglease run`, the real client-go elector (test/kube-apiserver-go/client-go-elector), or the
// advisory-lock poller. SIGKILL and
// SIGTERM are real signals to real processes. Every process started here is killed when the
// bench exits, however it exits.
import { type ChildProcess, spawn } from "node:child_process";
import { readFile } from "node:fs/promises";
import { createInterface } from "node:readline";
import { fileURLToPath } from "node:url";
import { PGLEASE_ENTRY } from "../../test/support/processes/demo-helpers.ts";

export type PeerKind = "pglease" | "client-go" | "advisory-lock";

export interface Exit {
  code: number | null;
  signal: NodeJS.Signals | null;
}

/** What a log line means for the election, whichever program wrote it. */
export type ElectionEvent = "started" | "acquired" | "lost";

export interface LogLine {
  /** Date.now() when the bench read the line. */
  receivedAt: number;
  event: ElectionEvent | null;
  fields: Record<string, unknown>;
}

/** The Node entries; client-go is a Go binary, given to the constructor. */
const ENTRIES: Record<Exclude<PeerKind, "client-go">, string> = {
  pglease: PGLEASE_ENTRY,
  "advisory-lock": fileURLToPath(new URL("./advisory-lock-candidate.ts", import.meta.url)),
};

const STDERR_LINES_KEPT = 5;
const live = new Set<ChildProcess>();

// The last resort on any exit of the bench (an error, a second Ctrl-C): no candidate outlives it.
process.on("exit", () => {
  for (const child of live) child.kill("SIGKILL");
});

/** Candidate processes started and not yet exited. */
export function liveCandidates(): number {
  return live.size;
}

function eventOf(kind: PeerKind, fields: Record<string, unknown>): ElectionEvent | null {
  if (kind === "pglease") {
    if (typeof fields.http === "string") return "started";
    if (fields.outcome === "acquired") return "acquired";
    if (["lost", "stepped-down", "released"].includes(String(fields.outcome))) return "lost";
    return null;
  }
  if (fields.event === "started" || fields.event === "acquired") return fields.event;
  if (["stopped-leading", "released", "lost"].includes(String(fields.event))) return "lost";
  return null;
}

export class Candidate {
  readonly kind: PeerKind;
  readonly pod: string;
  readonly child: ChildProcess;
  readonly pid: number;
  readonly exited: Promise<Exit>;
  /** Date.now() just before the process was spawned. */
  readonly spawnedAt = Date.now();
  readonly lines: LogLine[] = [];
  /** The identity it campaigns as: pglease's holder, client-go's identity, the pod for the advisory lock. */
  identity: string | null = null;
  readonly #stderr: string[] = [];
  readonly #listeners = new Set<(line: LogLine) => void>();

  /** `program`: the binary to run (the real client-go elector); required for client-go. */
  constructor(
    kind: PeerKind,
    pod: string,
    args: readonly string[],
    env: NodeJS.ProcessEnv,
    program?: string,
  ) {
    this.kind = kind;
    this.pod = pod;
    if (kind === "advisory-lock") this.identity = pod;
    // A clean environment: the bench's own database and cluster settings do not leak in.
    const base = { PATH: process.env.PATH, HOME: process.env.HOME, NODE_NO_WARNINGS: "1" };
    let command: string;
    let argv: readonly string[];
    if (program) [command, argv] = [program, args];
    else if (kind === "client-go")
      throw new Error("client-go: no elector binary (scripts/build-kube-apiserver.sh)");
    else [command, argv] = [process.execPath, [ENTRIES[kind], ...args]];
    this.child = spawn(command, argv, {
      env: { ...base, ...env, POD_NAME: pod },
      stdio: ["ignore", "pipe", "pipe"],
    });
    this.pid = this.child.pid ?? -1;
    live.add(this.child);
    this.exited = new Promise<Exit>((resolve) => {
      this.child.once("exit", (code, signal) => resolve({ code, signal }));
      this.child.once("error", () => resolve({ code: null, signal: null }));
    }).finally(() => live.delete(this.child));
    const { stdout, stderr } = this.child;
    if (!stdout || !stderr) throw new Error("spawned without pipes");
    createInterface({ input: stderr }).on("line", (text) => {
      this.#stderr.push(text);
      if (this.#stderr.length > STDERR_LINES_KEPT) this.#stderr.shift();
    });
    createInterface({ input: stdout }).on("line", (text) => this.#read(text));
  }

  get running(): boolean {
    return this.child.exitCode === null && this.child.signalCode === null;
  }

  /** The first line (already read or still to come) that satisfies `accept`. */
  waitFor(accept: (line: LogLine) => boolean, timeoutMs: number, signal: AbortSignal): Promise<LogLine> {
    const seen = this.lines.find(accept);
    if (seen) return Promise.resolve(seen);
    return new Promise<LogLine>((resolve, reject) => {
      const finish = (error: Error | null, line?: LogLine) => {
        clearTimeout(timer);
        this.#listeners.delete(listener);
        signal.removeEventListener("abort", onAbort);
        if (error) reject(error);
        else if (line) resolve(line);
      };
      const listener = (line: LogLine) => {
        if (accept(line)) finish(null, line);
      };
      const onAbort = () => finish(signal.reason instanceof Error ? signal.reason : new Error("aborted"));
      const timer = setTimeout(
        () =>
          finish(
            new Error(
              `${this.kind} ${this.pod} (pid ${this.pid}): no such line in ${timeoutMs} ms; ${this.why()}`,
            ),
          ),
        timeoutMs,
      );
      this.#listeners.add(listener);
      signal.addEventListener("abort", onAbort, { once: true });
      void this.exited.then(() =>
        finish(new Error(`${this.kind} ${this.pod} (pid ${this.pid}) exited; ${this.why()}`)),
      );
    });
  }

  /** Sends the signal (if still running) and resolves once the process is gone. */
  kill(signal: NodeJS.Signals): Promise<Exit> {
    if (this.running) this.child.kill(signal);
    return this.exited;
  }

  /** Resident set size from /proc, in MB; null where /proc is not there or the process is gone. */
  rssMb(): Promise<number | null> {
    return this.#status("VmRSS");
  }

  /** The largest resident set size so far (VmHWM), in MB: what a memory limit must hold. */
  peakRssMb(): Promise<number | null> {
    return this.#status("VmHWM");
  }

  async #status(field: "VmRSS" | "VmHWM"): Promise<number | null> {
    try {
      const status = await readFile(`/proc/${this.pid}/status`, "utf8");
      const kb = new RegExp(`^${field}:\\s+(\\d+)\\s+kB`, "m").exec(status)?.[1];
      return kb === undefined ? null : Number(kb) / 1024;
    } catch {
      return null;
    }
  }

  why(): string {
    return `last stderr: ${this.#stderr.at(-1) ?? "none"}`;
  }

  #read(text: string): void {
    if (!text.startsWith("{")) return;
    let fields: Record<string, unknown>;
    try {
      fields = JSON.parse(text) as Record<string, unknown>;
    } catch {
      return;
    }
    // The latest wins: pglease appends its restart proof once its lease stack opens (transition
    // lines name the process `self`), and client-go campaigns again under a new identity after a loss.
    const identity = this.kind === "pglease" ? (fields.self ?? fields.holder) : fields.identity;
    if (typeof identity === "string") this.identity = identity;
    const line: LogLine = { receivedAt: Date.now(), event: eventOf(this.kind, fields), fields };
    this.lines.push(line);
    for (const listener of [...this.#listeners]) listener(line);
  }
}
