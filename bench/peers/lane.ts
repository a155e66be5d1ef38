// One election under test: three candidate processes of one system, with a database and an API
// server of their own (so what they cost is counted for them alone). The trials that stop its
// leader are in failover-trial.ts, restart-trial.ts and health-trial.ts.
import pg from "pg";
import type { RecordedRequest } from "../../test/support/kube/apiserver/index.ts";
import { FailoverTimer } from "../../test/support/processes/demo-helpers.ts";
import { type BenchDatabase, createBenchDatabase } from "../database.ts";
import { Candidate } from "./candidates.ts";
import { type KubeFixture, startKubeFixture } from "./kube-fixture.ts";
import { type StatementCounter, startStatementCounter } from "./statement-counter.ts";
import { argsFor, type PeerTiming, type SystemSpec } from "./systems.ts";
import { tearDown } from "./teardown.ts";
import { until } from "./wait.ts";

const LEASE = "bench-election";
const LOCK_KEY = 4242;
const CANDIDATES = 3;
// Both instants on the database server's clock, as text for FailoverTimer and as epoch ms.
const SERVER_CLOCK = `SELECT t::text AS text, (extract(epoch FROM t) * 1000)::float8 AS ms FROM clock_timestamp() AS t`;

export interface LaneEnvironment {
  /** The bench's database: lanes create databases of their own beside it. */
  benchDatabaseUrl: string;
  signal: AbortSignal;
}

const START_BUDGET_MS = 120_000;

export class Lane {
  readonly name: string;
  readonly system: SystemSpec;
  readonly timing: PeerTiming;
  readonly candidates: Candidate[] = [];
  /** The first cluster's API server; every cluster's is in #kubes. */
  kube: KubeFixture | null = null;
  #kubes: KubeFixture[] = [];
  database: BenchDatabase | null = null;
  /** Set when the lane counts its candidates' statements: they then reach the database through it. */
  counter: StatementCounter | null = null;
  readonly #env: LaneEnvironment;
  #admin: pg.Pool | null = null;
  #timer: FailoverTimer | null = null;
  #childEnv: NodeJS.ProcessEnv = {};

  private constructor(name: string, system: SystemSpec, timing: PeerTiming, env: LaneEnvironment) {
    this.name = name;
    this.system = system;
    this.timing = timing;
    this.#env = env;
  }

  /** Starts the servers and three candidates; close() undoes whatever was started, also after a failure here. */
  static async open(
    name: string,
    system: SystemSpec,
    timing: PeerTiming,
    env: LaneEnvironment,
    options: { countStatements?: boolean } = {},
  ): Promise<Lane> {
    const lane = new Lane(name, system, timing, env);
    try {
      await lane.#start(options.countStatements ?? false);
    } catch (error) {
      await lane.close();
      throw error;
    }
    return lane;
  }

  get timeoutMs(): number {
    return this.timing.leaseMs + 6 * this.timing.retryMs + 20_000;
  }

  async #start(countStatements: boolean): Promise<void> {
    const { kind } = this.system;
    if (kind !== "client-go") {
      this.database = await createBenchDatabase(this.#env.benchDatabaseUrl);
      this.#admin = new pg.Pool({
        connectionString: this.database.url,
        max: 1,
        application_name: "pglease-bench",
      });
      // The lane's database is dropped with its sessions at close: an idle connection ending then is expected.
      this.#admin.on("error", () => {});
      if (countStatements) this.counter = await startStatementCounter(this.database.url);
      this.#childEnv.DATABASE_URL = this.counter ? this.counter.url(this.database.url) : this.database.url;
      if (kind === "pglease") this.#timer = new FailoverTimer(this.database.url, LEASE);
    }
    if (kind !== "advisory-lock") {
      for (let c = 0; c < (this.system.clusters ?? 1); c++) this.#kubes.push(await startKubeFixture());
      this.kube = this.#kubes[0] ?? null;
    }
    for (let i = 1; i <= CANDIDATES; i++) {
      const pod = `${this.name}-${i}`;
      if (kind === "pglease") await this.#seedPod(pod);
      this.candidates.push(this.#spawn(pod));
    }
  }

  /** Candidate n's cluster: the clusters take the candidates in turn. */
  clusterOf(pod: string): number {
    return (Number(pod.slice(pod.lastIndexOf("-") + 1)) - 1) % Math.max(1, this.#kubes.length);
  }

  #kubeOf(pod: string): KubeFixture | undefined {
    return this.#kubes[this.clusterOf(pod)];
  }

  async #seedPod(pod: string): Promise<void> {
    await this.#kubeOf(pod)?.seedPod(pod, {
      "app.kubernetes.io/name": "bench",
      "app.kubernetes.io/instance": this.name,
    });
    // The health gate waits for the application's first ready report before it campaigns.
    if (this.system.healthGate) await this.kube?.setAppReady(pod, true);
  }

  /** The first request since `mark` that `matches`, as the API server recorded it. */
  waitForRequest(
    mark: number,
    matches: (r: RecordedRequest) => boolean,
    what: string,
  ): Promise<RecordedRequest> {
    return until(`${this.name}: ${what}`, this.timeoutMs, this.#env.signal, () =>
      this.kube?.requests.slice(mark).find(matches),
    );
  }

  #spawn(pod: string): Candidate {
    const args = argsFor(this.system, this.timing, LEASE, LOCK_KEY);
    const cluster = this.system.clusters
      ? { PGLEASE_CLUSTER_NAME: `cluster-${this.clusterOf(pod) + 1}` }
      : {};
    return new Candidate(
      this.system.kind,
      pod,
      this.system.podIdentity ? [...args, "--identity", pod] : args,
      { ...this.#childEnv, ...this.#kubeOf(pod)?.env, ...cluster },
      this.system.kind === "client-go" ? this.kube?.clientGoElector : undefined,
    );
  }

  /** The running candidate that most recently acquired and has not lost since. */
  leader(): Candidate | null {
    let best: { candidate: Candidate; at: number } | null = null;
    for (const candidate of this.candidates) {
      if (!candidate.running) continue;
      const last = candidate.lines.findLast((line) => line.event !== null);
      if (last?.event === "acquired" && (!best || last.receivedAt > best.at))
        best = { candidate, at: last.receivedAt };
    }
    return best?.candidate ?? null;
  }

  #label(pod: string): Promise<string | undefined> {
    return this.#kubeOf(pod)?.roleLabel(pod) ?? Promise.resolve(undefined);
  }

  /** Every candidate campaigning, one leader, and (pglease) only the leader's pod labelled leader. */
  async settle(): Promise<Candidate> {
    // Process start-up is not what is measured: on a loaded 2-core host a dozen candidates starting
    // at once took 35 s to print their first line, so it gets a budget of its own.
    await until(
      `${this.name}: candidates not started`,
      START_BUDGET_MS,
      this.#env.signal,
      () => this.candidates.every((c) => !c.running || c.lines.some((l) => l.event === "started")) || null,
      () => this.#candidatesState(),
    );
    return until(
      `${this.name}: no settled leader`,
      this.timeoutMs,
      this.#env.signal,
      async () => {
        if (!this.candidates.every((c) => c.running && c.lines.some((l) => l.event === "started")))
          return null;
        const leader = this.leader();
        if (!leader || this.system.kind !== "pglease") return leader;
        const labels = await Promise.all(this.candidates.map((c) => this.#label(c.pod)));
        const labelled = this.candidates.filter((_, i) => labels[i] === "leader");
        return labelled.length === 1 && labelled[0] === leader ? leader : null;
      },
      () => this.#candidatesState(),
    );
  }

  #candidatesState(): string {
    const states = this.candidates.map(
      (c) =>
        `${c.pod}: ${c.running ? "running" : "exited"}, events ${c.lines.map((l) => l.event ?? "-").join(",") || "none"}, ${c.why()}`,
    );
    return `: ${states.join("; ")}`;
  }

  /** Every cluster's API server, the first one's as `kube`. */
  get kubes(): readonly KubeFixture[] {
    return this.#kubes;
  }

  /** The lease the candidates campaign for. */
  get lease(): string {
    return LEASE;
  }

  /** The lane's own database, as the bench (lanes with a database only). */
  get admin(): pg.Pool | null {
    return this.#admin;
  }

  /** The lease's term reader (pglease lanes only). */
  get timer(): FailoverTimer | null {
    return this.#timer;
  }

  get signal(): AbortSignal {
    return this.#env.signal;
  }

  /** The pod's container started again in place, as the kubelet does: a new process in the same pod. */
  restart(dead: Candidate): Candidate {
    const slot = this.candidates.indexOf(dead);
    if (slot < 0 || dead.running)
      throw new Error(`${this.name}: ${dead.pod} is not a dead candidate of this lane`);
    const fresh = this.#spawn(dead.pod);
    this.candidates[slot] = fresh;
    return fresh;
  }

  /** The database server's clock (lanes with a database only). */
  async serverClock(): Promise<{ text: string; ms: number }> {
    const { rows } = await (this.#admin as pg.Pool).query<{ text: string; ms: number }>(SERVER_CLOCK);
    const row = rows[0];
    if (!row) throw new Error("the server did not tell its clock");
    return row;
  }

  /** The first acquisition since `since` (Date.now()) by a running candidate that `eligible` accepts. */
  firstAcquired(since: number, eligible: (candidate: Candidate) => boolean) {
    const { signal } = this.#env;
    const contenders = this.candidates.filter((c) => c.running && eligible(c));
    const controller = new AbortController();
    const both = AbortSignal.any([signal, controller.signal]);
    return Promise.any(
      contenders.map((c) =>
        c.waitFor((l) => l.event === "acquired" && l.receivedAt >= since, this.timeoutMs, both),
      ),
    ).finally(() => controller.abort());
  }

  /**
   * Kills the candidates first, then undoes the rest step by step; every step is tried even when
   * one fails (after Ctrl-C the database server may already be gone), and the first error is thrown.
   */
  async close(): Promise<void> {
    await tearDown([
      () => Promise.all(this.candidates.map((c) => c.kill("SIGKILL"))),
      () => this.#timer?.close(),
      () => this.#admin?.end(),
      () => Promise.all(this.#kubes.map((k) => k.close())),
      () => this.counter?.close(),
      () => this.database?.drop(),
    ]);
  }
}
