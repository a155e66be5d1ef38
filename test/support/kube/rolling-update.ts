// A rolling update of the chart's Deployment on an API server, the harness playing the Deployment
// and ReplicaSet controllers and the kubelet: new pods (a new pod-template-hash) are created up to
// replicas + maxSurge; an old pod is deleted only while enough pods are Ready (replicas -
// maxUnavailable); its deletion marks it terminating, the kubelet sends SIGTERM to its sidecar
// and removes the pod once the process has exited. Among old pods, which one the ReplicaSet
// deletes is not the operator's to choose: the caller picks (the leader first is the order that
// moves leadership most).
import { setTimeout as delay } from "node:timers/promises";
import type { V1Pod } from "@kubernetes/client-node";
import type { ChartDeployment } from "./chart-deployment.ts";
import type { TestKube } from "./kube-servers.ts";
import { seedWorkloadPod } from "./kubelet.ts";

/** A pod's sidecar process as the kubelet runs it. */
export interface PodProcess {
  /** The readiness probe, once. */
  ready(): Promise<boolean>;
  /** SIGTERM; resolves once the process has exited. */
  terminate(): Promise<void>;
}

export interface DeploymentPod {
  name: string;
  revision: string;
  process: PodProcess;
  ready: boolean;
  terminating: Promise<void> | null;
}

const RECONCILE_MS = 20;

export class DeploymentPods {
  readonly pods = new Map<string, DeploymentPod>();
  /** Date.now() when the kubelet removed each pod. */
  readonly removedAt = new Map<string, number>();
  readonly #kube: TestKube;
  readonly #namespace: string;
  readonly #start: (pod: V1Pod, deployment: ChartDeployment) => Promise<PodProcess>;

  constructor(
    kube: TestKube,
    namespace: string,
    start: (pod: V1Pod, deployment: ChartDeployment) => Promise<PodProcess>,
  ) {
    this.#kube = kube;
    this.#namespace = namespace;
    this.#start = start;
  }

  /** The ReplicaSet's create, then the kubelet's start (the application reported ready at once). */
  async create(deployment: ChartDeployment): Promise<DeploymentPod> {
    const suffix = Array.from(
      { length: 5 },
      () => "bcdfghjklmnpqrstvwxz2456789"[Math.floor(Math.random() * 27)],
    );
    const name = `${deployment.name}-${deployment.podTemplateHash}-${suffix.join("")}`;
    const labels = { ...deployment.labels, "pod-template-hash": deployment.podTemplateHash };
    await seedWorkloadPod(this.#kube, this.#namespace, name, labels, true);
    const pod = await this.#kube.pod(this.#namespace, name);
    if (!pod) throw new Error(`pod ${name} vanished after its creation`);
    const entry: DeploymentPod = {
      name,
      revision: deployment.podTemplateHash,
      process: await this.#start(pod, deployment),
      ready: false,
      terminating: null,
    };
    this.pods.set(name, entry);
    return entry;
  }

  /** The controller's DELETE; the kubelet's SIGTERM and final removal follow without the caller waiting. */
  delete(name: string, graceSeconds: number): void {
    const pod = this.pods.get(name);
    if (!pod || pod.terminating) throw new Error(`pod ${name} is not a live pod of the rollout`);
    pod.terminating = (async () => {
      if (graceSeconds > 0) await this.#kube.deletePod(this.#namespace, name, graceSeconds);
      await pod.process.terminate();
      await this.#kube.deletePod(this.#namespace, name, 0);
      this.removedAt.set(name, Date.now());
      this.pods.delete(name);
    })();
  }

  /** Pods of `revision` not being deleted. */
  live(revision: string): DeploymentPod[] {
    return [...this.pods.values()].filter((p) => p.revision === revision && !p.terminating);
  }

  async #probe(pods: DeploymentPod[]): Promise<void> {
    await Promise.all(pods.filter((p) => !p.ready).map(async (p) => (p.ready = await p.process.ready())));
  }

  /** Every pod terminated and removed. */
  async drain(): Promise<void> {
    for (const pod of [...this.pods.values()]) if (!pod.terminating) this.delete(pod.name, 0);
    await Promise.all([...this.pods.values()].map((p) => p.terminating));
  }

  /** Initial pods of `deployment`, all Ready. */
  async scaleUp(deployment: ChartDeployment, timeoutMs: number): Promise<void> {
    for (let i = 0; i < deployment.replicas; i++) await this.create(deployment);
    await until(timeoutMs, async () => {
      await this.#probe(this.live(deployment.podTemplateHash));
      return this.live(deployment.podTemplateHash).every((p) => p.ready);
    });
  }

  /**
   * Rolls `from` to `to` as the Deployment controller does, and waits until every old pod is gone.
   * `victim` picks the old pod the ReplicaSet deletes next.
   */
  async roll(
    from: ChartDeployment,
    to: ChartDeployment,
    victim: (old: DeploymentPod[]) => Promise<DeploymentPod>,
    timeoutMs: number,
  ): Promise<void> {
    const { replicas, maxSurge, maxUnavailable } = to;
    await until(timeoutMs, async () => {
      const old = this.live(from.podTemplateHash);
      let fresh = this.live(to.podTemplateHash);
      while (old.length + fresh.length < replicas + maxSurge && fresh.length < replicas) {
        await this.create(to);
        fresh = this.live(to.podTemplateHash);
      }
      await this.#probe([...old, ...fresh]);
      const ready = [...old, ...fresh].filter((p) => p.ready).length;
      for (let allowed = ready - (replicas - maxUnavailable); allowed > 0 && old.length > 0; allowed--) {
        const pod = await victim(old);
        this.delete(pod.name, from.terminationGraceSeconds);
        old.splice(old.indexOf(pod), 1);
      }
      return old.length === 0 && fresh.length === replicas && fresh.every((p) => p.ready);
    });
    await Promise.all([...this.pods.values()].map((p) => p.terminating));
  }
}

async function until(timeoutMs: number, done: () => Promise<boolean>): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await done())) {
    if (Date.now() > deadline) throw new Error(`the rollout did not complete within ${timeoutMs} ms`);
    await delay(RECONCILE_MS);
  }
}
