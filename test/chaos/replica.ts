// One chaos replica, as a pod would have it: the real `pglease run` sidecar (with the loop-block
// preload) and a leader-only workload next to it, both reaching PostgreSQL through the replica's
// own fault proxy, the sidecar reaching the API server through another. A process that dies
// without being told to is started again after a short back-off, as the kubelet would.
import { type ChildProcess, spawn } from "node:child_process";
import { writeFile } from "node:fs/promises";
import { join } from "node:path";
import { createInterface } from "node:readline";
import { fileURLToPath, pathToFileURL } from "node:url";
import { KubeConfig } from "@kubernetes/client-node";
import { freePort } from "../support/postgres/embedded-postgres.ts";
import { type FaultProxy, startFaultProxy } from "../support/postgres/fault-proxy.ts";
import { type Running, startPglease } from "../support/processes/cli.ts";
import { exited, signal, terminate, track } from "./processes.ts";
import { jsonLine, type Recorder } from "./recorder.ts";
import { healthGraceOf, healthSettleOf } from "./schedule.ts";

const PRELOAD = pathToFileURL(fileURLToPath(new URL("./block-loop-preload.ts", import.meta.url))).href;
const WORKLOAD = fileURLToPath(new URL("./workload.ts", import.meta.url));
const RESTART_AFTER_MS = 500;
const STOP_GRACE_MS = 4_000;

export interface ReplicaSettings {
  name: string;
  namespace: string;
  lease: string;
  /** Held besides `lease`: a process leading several renews and releases them in one statement. */
  extraLeases: string[];
  leaseMs: number;
  retryMs: number;
  blockMs: number;
  /** The database as seen without a proxy; each replica rewrites it to its own proxy. */
  databaseUrl: string;
  database: { host: string; port: number };
  /** The API server (or the fault proxy before it), its scheme and CA, and this pod's token. */
  api: { host: string; port: number; scheme: "http" | "https"; caFile?: string; token: string };
  /** Where the replica's kubeconfig file goes. */
  dir: string;
  guarded: boolean;
  /** The sidecars run with --session-takeover. */
  sessionTakeover: boolean;
  /** The sidecars run with --crash-takeover, each run writing its own termination message file. */
  crashTakeover: boolean;
  recorder: Recorder;
  /** Something a reader of the report should know: an unexpected exit, say. */
  note(message: string): void;
}

export interface PauseToken {
  processes: ChildProcess[];
  end: () => void;
}

export class Replica {
  readonly name: string;
  readonly #settings: ReplicaSettings;
  readonly dbProxy: FaultProxy;
  readonly apiProxy: FaultProxy;
  readonly #httpPort: number;
  readonly #kubeconfig: string;
  #sidecar: Running | null = null;
  /** How many times the sidecar was started: each run gets a termination message file of its own, as the kubelet gives it. */
  #runs = 0;
  #workload: ChildProcess | null = null;
  #killed = new Set<number>();
  #killedWorkloads = new WeakSet<ChildProcess>();
  #stopping = false;
  #stopped: Promise<void> | null = null;
  #blockDone: ((window: { from: number; to: number } | null) => void) | null = null;

  private constructor(settings: ReplicaSettings, proxies: [FaultProxy, FaultProxy], httpPort: number) {
    this.name = settings.name;
    this.#settings = settings;
    [this.dbProxy, this.apiProxy] = proxies;
    this.#httpPort = httpPort;
    this.#kubeconfig = join(settings.dir, `${settings.name}.kubeconfig`);
  }

  static async start(settings: ReplicaSettings): Promise<Replica> {
    const proxies: [FaultProxy, FaultProxy] = [
      await startFaultProxy(settings.database),
      await startFaultProxy({ host: settings.api.host, port: settings.api.port }),
    ];
    const replica = new Replica(settings, proxies, await freePort());
    await writeFile(replica.#kubeconfig, replica.#kubeConfigText());
    replica.startSidecar();
    replica.#startWorkload();
    return replica;
  }

  get sidecarPid(): number | null {
    const child = this.#sidecar?.child;
    return child && child.exitCode === null && child.signalCode === null ? (child.pid ?? null) : null;
  }

  #kubeConfigText(): string {
    const kc = new KubeConfig();
    kc.loadFromOptions({
      clusters: [
        {
          name: "chaos",
          server: `${this.#settings.api.scheme}://127.0.0.1:${this.apiProxy.port}`,
          // client-node wants skipTLSVerify for plain http (the in-process server); https is verified.
          ...(this.#settings.api.caFile ? { caFile: this.#settings.api.caFile } : { skipTLSVerify: true }),
        },
      ],
      users: [{ name: "pglease", token: this.#settings.api.token }],
      contexts: [{ name: "chaos", cluster: "chaos", user: "pglease", namespace: this.#settings.namespace }],
      currentContext: "chaos",
    });
    return kc.exportConfig();
  }

  /** The current sidecar run's termination message file (--crash-takeover). */
  get terminationMessagePath(): string {
    return join(this.#settings.dir, `${this.name}-run${this.#runs}.termination`);
  }

  startSidecar(): void {
    const s = this.#settings;
    this.#runs++;
    const sidecar = startPglease(
      [
        "run",
        ...[
          "--lease",
          [s.lease, ...s.extraLeases].join(","),
          "--duration",
          `${s.leaseMs}ms`,
          "--retry-interval",
          `${s.retryMs}ms`,
        ],
        ...["--http-addr", `127.0.0.1:${this.#httpPort}`, "--grace-period", "3s", "--log-level", "info"],
        // Leadership follows the application container's readiness in the pod's status (app-status.ts).
        ...["--health-gate", "pod", "--health-grace", `${healthGraceOf(s.leaseMs)}ms`],
        ...["--health-settle", `${healthSettleOf(s.leaseMs)}ms`],
        ...(s.sessionTakeover ? ["--session-takeover"] : []),
        ...(s.crashTakeover
          ? ["--crash-takeover", "--termination-message-path", this.terminationMessagePath]
          : []),
      ],
      {
        DATABASE_URL: this.dbProxy.url(s.databaseUrl),
        KUBECONFIG: this.#kubeconfig,
        POD_NAME: this.name,
        POD_NAMESPACE: s.namespace,
        NODE_OPTIONS: `--import=${PRELOAD}`,
        CHAOS_BLOCK_MS: String(s.blockMs),
      },
    );
    const child = track(sidecar.child);
    const pid = child.pid ?? -1;
    this.#sidecar = sidecar;
    s.recorder.sidecarStarted(this.name, pid, Date.now());
    if (child.stdout) {
      createInterface({ input: child.stdout }).on("line", (text) => {
        const line = jsonLine(text);
        if (!line) return;
        s.recorder.sidecarLine(pid, line);
        if (line.chaos === "loop-block") {
          this.#blockDone?.({ from: Number(line.blockedFrom), to: Number(line.blockedTo) });
        }
      });
    }
    child.once("exit", (code, sig) => {
      s.recorder.sidecarEnded(pid, Date.now());
      this.#blockDone?.(null);
      if (this.#stopping || this.#killed.has(pid)) return;
      const last = sidecar.output().trim().split("\n").at(-1) ?? "";
      s.note(
        `${this.name}: pglease run (pid ${pid}) exited by itself (${sig ?? `code ${code}`}): ${last.slice(0, 300)}`,
      );
      setTimeout(() => {
        if (!this.#stopping && this.#sidecar === sidecar) this.startSidecar();
      }, RESTART_AFTER_MS);
    });
  }

  #startWorkload(): void {
    const s = this.#settings;
    const child = track(
      spawn(process.execPath, [WORKLOAD], {
        env: {
          PATH: process.env.PATH,
          NODE_NO_WARNINGS: "1",
          DATABASE_URL: this.dbProxy.url(s.databaseUrl),
          CHAOS_STATUS_URL: `http://127.0.0.1:${this.#httpPort}/status`,
          CHAOS_REPLICA: this.name,
          CHAOS_RESOURCE: s.lease,
          CHAOS_GUARD: s.guarded ? "on" : "off",
        },
        stdio: ["pipe", "pipe", "pipe"],
      }),
    );
    this.#workload = child;
    let stderr = "";
    child.stderr?.on("data", (d: Buffer) => {
      stderr = (stderr + d.toString()).slice(-2_000);
    });
    if (child.stdout) {
      createInterface({ input: child.stdout }).on("line", (text) => {
        const line = jsonLine(text);
        if (line) s.recorder.workloadLine(line);
      });
    }
    child.once("exit", (code, sig) => {
      if (this.#stopping || this.#killedWorkloads.has(child)) return;
      s.note(
        `${this.name}: workload exited by itself (${sig ?? `code ${code}`}): ${stderr.trim().slice(-300)}`,
      );
      setTimeout(() => {
        if (!this.#stopping) this.#startWorkload();
      }, RESTART_AFTER_MS);
    });
  }

  /** SIGKILL of the sidecar; false when it was not running. Its death is the kill's instant. */
  killSidecar(): boolean {
    const child = this.#sidecar?.child;
    const pid = this.sidecarPid;
    if (!child || pid === null) return false;
    this.#killed.add(pid);
    this.#settings.recorder.sidecarEnded(pid, Date.now());
    return signal(child, "SIGKILL");
  }

  /**
   * A container restart: SIGKILL of the sidecar and the workload; the answer starts both again
   * under the same pod name (the sidecar with a new holder identity). Null when the sidecar is down.
   */
  restartPod(): (() => void) | null {
    if (!this.killSidecar()) return null;
    const workload = this.#workload;
    if (workload) {
      this.#killedWorkloads.add(workload);
      signal(workload, "SIGKILL");
    }
    return () => {
      if (this.#stopping) return;
      this.startSidecar();
      this.#startWorkload();
    };
  }

  /** SIGSTOP of the sidecar, or of the whole pod (sidecar and workload). Null when the sidecar is down. */
  pause(scope: "pod" | "sidecar"): PauseToken | null {
    const sidecar = this.#sidecar?.child;
    const pid = this.sidecarPid;
    if (!sidecar || pid === null) return null;
    const processes = scope === "pod" && this.#workload ? [sidecar, this.#workload] : [sidecar];
    for (const child of processes) signal(child, "SIGSTOP");
    const pause = this.#settings.recorder.pauseStarted(pid, "sigstop", Date.now());
    return {
      processes,
      end: () => {
        // Taken before SIGCONT: the window counted as paused is never longer than the real one.
        if (sidecar.exitCode === null && sidecar.signalCode === null) pause.to = Date.now();
        for (const child of processes) signal(child, "SIGCONT");
      },
    };
  }

  /** Blocks the sidecar's event loop for the run's block duration; resolves with the exact window. */
  blockLoop(): Promise<{ from: number; to: number } | null> {
    const child = this.#sidecar?.child;
    const pid = this.sidecarPid;
    if (!child || pid === null) return Promise.resolve(null);
    const sentAt = Date.now();
    return new Promise((resolve) => {
      this.#blockDone = (window) => {
        this.#blockDone = null;
        if (window === null) this.#settings.recorder.pauseStarted(pid, "loop-block", sentAt);
        resolve(window);
      };
      signal(child, "SIGUSR2");
    });
  }

  /** Idempotent. */
  stop(): Promise<void> {
    this.#stopped ??= this.#stop();
    return this.#stopped;
  }

  async #stop(): Promise<void> {
    this.#stopping = true;
    const children = [this.#workload, this.#sidecar?.child].filter((c): c is ChildProcess => !!c);
    await Promise.all(children.map((c) => terminate(c, STOP_GRACE_MS)));
    await Promise.all(children.map(exited));
    this.dbProxy.heal();
    this.apiProxy.heal();
    await Promise.all([this.dbProxy.close(), this.apiProxy.close()]);
  }
}
