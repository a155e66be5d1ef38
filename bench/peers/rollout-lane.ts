// One Deployment rolled again and again: the chart's Deployment of 3 replicas, its pods created
// and deleted as the Deployment controller does (test/support/kube/rolling-update.ts), each pod's
// election a real process (`pglease run` with the chart's environment, or the real client-go
// elector with ReleaseOnCancel), each old pod's deletion a SIGTERM. Who leads is read from what
// the candidates sent the API server: pglease's role labels, client-go's Lease writes.
import type { V1Pod } from "@kubernetes/client-node";
import {
  type ChartDeployment,
  renderChartDeployment,
  sidecarEnvironment,
} from "../../test/support/kube/chart-deployment.ts";
import { labelEvents, leaseEvents, type Shown, timeline } from "../../test/support/kube/leader-timeline.ts";
import {
  type DeploymentPod,
  DeploymentPods,
  type PodProcess,
} from "../../test/support/kube/rolling-update.ts";
import { type BenchDatabase, createBenchDatabase } from "../database.ts";
import { Candidate } from "./candidates.ts";
import { type KubeFixture, startKubeFixture } from "./kube-fixture.ts";
import type { LaneEnvironment } from "./lane.ts";
import { argsFor, type PeerTiming, SYSTEMS } from "./systems.ts";
import { tearDown } from "./teardown.ts";
import { until } from "./wait.ts";

export type RolloutSystem = "pglease" | "client-go-release";

export interface RolloutTrial {
  /** Leadership moved to another pod this many times, from the first old pod deleted to the last removed. */
  changes: number;
  /** Time within the rollout when no pod was shown leading (pglease: labelled; client-go: the Lease's holder). */
  unlabelledMs: number;
  /** The leaders in turn, by revision: "old" or "new". */
  leaders: string[];
  durationMs: number;
}

const LEASE = "pglease";
const ROLLOUT_BUDGET_MS = 180_000;

export class RolloutLane {
  readonly system: RolloutSystem;
  readonly #timing: PeerTiming;
  readonly #env: LaneEnvironment;
  database: BenchDatabase | null = null;
  kube: KubeFixture | null = null;
  #pods: DeploymentPods | null = null;
  readonly candidates = new Map<string, Candidate>();
  #revision = 0;
  #current: ChartDeployment | null = null;

  private constructor(system: RolloutSystem, timing: PeerTiming, env: LaneEnvironment) {
    this.system = system;
    this.#timing = timing;
    this.#env = env;
  }

  /** The Deployment's first revision, all its pods Ready and a leader shown; close() undoes a failed start. */
  static async open(system: RolloutSystem, timing: PeerTiming, env: LaneEnvironment): Promise<RolloutLane> {
    const lane = new RolloutLane(system, timing, env);
    try {
      lane.database = await createBenchDatabase(env.benchDatabaseUrl);
      lane.kube = await startKubeFixture();
      lane.#pods = new DeploymentPods(lane.kube.server, lane.kube.namespace, (pod, d) => lane.#start(pod, d));
      lane.#current = await lane.#nextRevision();
      await lane.#pods.scaleUp(lane.#current, ROLLOUT_BUDGET_MS);
    } catch (error) {
      await lane.close();
      throw error;
    }
    return lane;
  }

  /** The strategy the chart renders, as the controller resolves it. */
  get strategy(): { replicas: number; maxSurge: number; maxUnavailable: number } {
    const { replicas, maxSurge, maxUnavailable } = this.#current as ChartDeployment;
    return { replicas, maxSurge, maxUnavailable };
  }

  get pods(): DeploymentPods {
    return this.#pods as DeploymentPods;
  }

  #nextRevision(): Promise<ChartDeployment> {
    this.#revision++;
    return renderChartDeployment({ app: { image: { tag: `${this.#revision}.0` } } });
  }

  async #start(pod: V1Pod, deployment: ChartDeployment): Promise<PodProcess> {
    const kube = this.kube as KubeFixture;
    const name = pod.metadata?.name ?? "";
    const system = SYSTEMS[this.system];
    const chartEnv =
      system.kind === "pglease"
        ? sidecarEnvironment(deployment, pod, { DATABASE_URL: this.database?.url ?? "" })
        : {};
    const candidate = new Candidate(
      system.kind,
      name,
      argsFor(system, this.#timing, LEASE, 0),
      { ...chartEnv, ...kube.env },
      system.kind === "client-go" ? kube.clientGoElector : undefined,
    );
    this.candidates.set(name, candidate);
    return {
      ready: async () => {
        const started = candidate.lines.find((l) => l.event === "started");
        if (!started) return false;
        // client-go's elector has no probe: started is as ready as it gets.
        if (typeof started.fields.http !== "string") return true;
        const answer = await fetch(`http://${started.fields.http}/readyz`).catch(() => null);
        return answer?.status === 200;
      },
      terminate: async () => {
        await candidate.kill("SIGTERM");
      },
    };
  }

  /** Everything shown since the lane started: a Lease write means something only after the one before it. */
  #shown(): Shown[] {
    const { requests } = this.kube as KubeFixture;
    if (this.system === "pglease") return labelEvents(requests, this.pods.removedAt);
    const pods = new Map<string, string>();
    for (const c of this.candidates.values()) if (c.identity) pods.set(c.identity, c.pod);
    return leaseEvents(requests, pods);
  }

  /** The pods shown leading now. */
  #showing(): Set<string> {
    const showing = new Set<string>();
    for (const e of this.#shown().sort((a, b) => a.at - b.at)) {
      if (e.leader) showing.add(e.pod);
      else showing.delete(e.pod);
    }
    return showing;
  }

  /** The one pod shown leading, once it is a live pod of `revision`. */
  #leaderOf(revision: string): Promise<string> {
    return until(
      `${this.system}: no leader of revision ${revision} shown`,
      ROLLOUT_BUDGET_MS,
      this.#env.signal,
      () => {
        const showing = [...this.#showing()];
        const live = this.pods.live(revision).map((p) => p.name);
        return showing.length === 1 && showing[0] && live.includes(showing[0]) ? showing[0] : null;
      },
    );
  }

  /** The pod leading now (the request log read from its start). */
  leader(): Promise<string> {
    return this.#leaderOf((this.#current as ChartDeployment).podTemplateHash);
  }

  /** Rolls to a new revision, the leader's pod deleted first; the rollout ends when a new pod leads. */
  async rollout(): Promise<RolloutTrial> {
    const from = this.#current as ChartDeployment;
    const to = await this.#nextRevision();
    const first = await this.leader();
    const startedAt = Date.now();
    // The ReplicaSet's choice among equally ranked old pods: the one leading now, the worst order.
    const leaderFirst = async (old: DeploymentPod[]) => {
      const showing = this.#showing();
      return old.find((p) => showing.has(p.name)) ?? (old[0] as DeploymentPod);
    };
    await this.pods.roll(from, to, leaderFirst, ROLLOUT_BUDGET_MS);
    this.#current = to;
    await this.#leaderOf(to.podTemplateHash);
    const endedAt = Date.now();
    const shown = timeline(this.#shown(), first, startedAt, endedAt);
    const revisionOf = (pod: string) => (pod.includes(`-${to.podTemplateHash}-`) ? "new" : "old");
    return {
      changes: shown.changes,
      unlabelledMs: shown.unlabelledMs,
      leaders: shown.leaders.map(revisionOf),
      durationMs: endedAt - startedAt,
    };
  }

  /**
   * `leases.handover(KEY, { to })` (what `pglease handover KEY --to POD` runs) to a follower, timed
   * from the call to the accepted patch that labels the target's pod leader; then until only it is shown.
   */
  async handover(handover: (to: string) => Promise<unknown>): Promise<number> {
    const from = await this.leader();
    const to = this.pods
      .live((this.#current as ChartDeployment).podTemplateHash)
      .find((p) => p.name !== from);
    if (!to) throw new Error("no follower to hand over to");
    const mark = (this.kube as KubeFixture).requests.length;
    const startedAt = Date.now();
    await handover(to.name);
    const labelled = await until(
      `${this.system}: ${to.name} never labelled leader`,
      ROLLOUT_BUDGET_MS,
      this.#env.signal,
      () =>
        labelEvents((this.kube as KubeFixture).requests.slice(mark), new Map()).find(
          (e) => e.leader && e.pod === to.name,
        ),
    );
    if ((await this.leader()) !== to.name)
      throw new Error(`the handover to ${to.name} left another leader shown`);
    return labelled.at - startedAt;
  }

  /** Every process killed, the servers and the database undone; each step tried, the first error thrown. */
  async close(): Promise<void> {
    await tearDown([
      () => Promise.all([...this.candidates.values()].map((c) => c.kill("SIGKILL"))),
      () => this.kube?.close(),
      () => this.database?.drop(),
    ]);
  }
}
