// What a platform team's routine disruptions do to charts/pglease in a real single-node cluster
// (the real Deployment and disruption controllers, the kubelet's probes and graceful termination,
// the EndpointSlice controller): a `kubectl rollout restart`, evictions through the chart's
// PodDisruptionBudget (what `kubectl drain` sends), and the application's readiness probe failing
// under the health gate. In each, the leader Service must never list two ready pods, and the time
// it lists none is measured from a watch on its EndpointSlices; the pods' watch says who carried
// the leader label when.
import { describe, expect, it } from "vitest";
import { evict } from "./api.ts";
import { type EndpointTimeline, watchEndpoints } from "./endpoint-timeline.ts";
import { guardDrops } from "./network.ts";
import { type PodState, type PodTimeline, watchPods } from "./pod-timeline.ts";
import { APP_PORT, get } from "./release.ts";
import { releaseSuite } from "./release-suite.ts";
import { clusterSkipReason, describePods, until } from "./session.ts";

const SUITE = "cluster disruptions";
const skip = (await clusterSkipReason(SUITE)) !== null;
const REPLICAS = 3;
const ROLLOUTS = Number(process.env.PGLEASE_CLUSTER_TRIALS ?? 2);

describe.skipIf(skip)("charts/pglease through rollouts, evictions and an unready application", () => {
  const cluster = releaseSuite({
    suite: SUITE,
    replicas: REPLICAS,
    // The application's own readiness probe, as a user sets one: the health gate (on by default,
    // `health.gate: pod`) follows what the kubelet makes of it.
    values: (base) => ({
      ...base,
      app: {
        ...base.app,
        readinessProbe: { httpGet: { path: "/ready", port: "http" }, periodSeconds: 1, failureThreshold: 2 },
      },
    }),
    ready: async () => {
      await steady(180_000);
    },
  });
  const { figures } = cluster;

  const live = (list: PodState[]) => list.filter((p) => !p.gone);
  const leaders = (list: PodState[]) => live(list).filter((p) => p.role === "leader");

  /** Every pod Ready, none going, exactly one labelled leader, and the leader Service listing it. */
  async function steady(timeoutMs: number): Promise<{ leader: PodState; pods: PodState[] }> {
    const podWatch = await watchPods(cluster.release.namespace, cluster.selector);
    const endpoints = await watchEndpoints(cluster.release.namespace, cluster.release.leaderService);
    try {
      const { pods } = await podWatch
        .waitFor((list) => {
          const up = live(list);
          return (
            up.length === REPLICAS && up.every((p) => p.ready && !p.deleting) && leaders(list).length === 1
          );
        }, timeoutMs)
        .catch(async (error: Error) => {
          throw new Error(
            `${error.message}\n${await describePods(cluster.session, cluster.release.namespace, cluster.selector)}`,
          );
        });
      const leader = leaders(pods)[0] as PodState;
      await endpoints.waitFor((ready) => ready.join() === leader.name, 60_000);
      return { leader, pods: live(pods) };
    } finally {
      podWatch.stop();
      endpoints.stop();
    }
  }

  /** Both watches for one scenario, stopped however it ends. */
  async function observe<T>(scenario: (pods: PodTimeline, endpoints: EndpointTimeline) => Promise<T>) {
    const pods = await watchPods(cluster.release.namespace, cluster.selector);
    const endpoints = await watchEndpoints(cluster.release.namespace, cluster.release.leaderService);
    try {
      return await scenario(pods, endpoints).catch(async (error: Error) => {
        throw new Error(
          `${error.message}\n${await describePods(cluster.session, cluster.release.namespace, cluster.selector)}`,
        );
      });
    } finally {
      pods.stop();
      endpoints.stop();
    }
  }

  const disruptionsAllowed = async () =>
    Number(
      await cluster.session.kubectl([
        "get",
        "poddisruptionbudget",
        cluster.release.workload,
        "-n",
        cluster.release.namespace,
        "-o",
        "jsonpath={.status.disruptionsAllowed}",
      ]),
    );

  it("moves leadership exactly once per `kubectl rollout restart`, never with two ready endpoints", async () => {
    const trials: Record<string, unknown>[] = [];
    for (let trial = 0; trial < ROLLOUTS; trial++) {
      const before = await steady(180_000);
      const oldRevisions = new Set(before.pods.map((p) => p.revision));
      trials.push(
        await observe(async (pods, endpoints) => {
          const startedAt = performance.now();
          await cluster.session.kubectl([
            "rollout",
            "restart",
            `deployment/${cluster.release.workload}`,
            "-n",
            cluster.release.namespace,
          ]);
          // The real Deployment controller: one pod of surge, none unavailable (the chart leaves
          // Kubernetes' 25 % / 25 %), an old pod deleted once a new one is Ready; the PDB beside it.
          await cluster.session.kubectl([
            "rollout",
            "status",
            `deployment/${cluster.release.workload}`,
            "-n",
            cluster.release.namespace,
            "--timeout=300s",
          ]);
          const done = await pods.waitFor((list) => {
            const up = live(list);
            return (
              up.length === REPLICAS &&
              up.every((p) => p.ready && !p.deleting && !oldRevisions.has(p.revision)) &&
              leaders(list).length === 1
            );
          }, 180_000);
          const leader = leaders(done.pods)[0] as PodState;
          await endpoints.waitFor((ready) => ready.join() === leader.name, 60_000);
          const end = performance.now();
          const moves = pods.newLeaders(startedAt);
          const firstGone = pods.first((p) => p.gone, startedAt);
          const leaderDeleting = pods.first((p) => p.name === before.leader.name && p.deleting, startedAt);
          return {
            leaderMoves: moves.length,
            fences: `${before.leader.fence} -> ${moves.map((m) => m.fence).join(", ")}`,
            newLeaderOfNewRevision: !oldRevisions.has(leader.revision),
            leaderlessMs: Math.round(endpoints.durationWhere((r) => r.length === 0, startedAt, end)),
            twoReadyMs: Math.round(endpoints.durationWhere((r) => r.length >= 2, startedAt, end)),
            rolloutMs: Math.round(end - startedAt),
            // When the one move came, from the rollout's start and from the first old pod gone.
            moveAtMs: Math.round((moves[0]?.atMs ?? end) - startedAt),
            firstOldPodGoneAtMs: Math.round((firstGone?.atMs ?? end) - startedAt),
            // The old leader's deletion (its endpoint not ready from then) to the new leader labelled.
            leaderDeletedToNewLabelMs: Math.round((moves[0]?.atMs ?? end) - (leaderDeleting?.atMs ?? end)),
          };
        }),
      );
    }
    figures.rolloutRestart = trials;
    for (const t of trials) {
      expect(t.leaderMoves).toBe(1);
      expect(t.newLeaderOfNewRevision).toBe(true);
      expect(t.twoReadyMs).toBe(0);
    }
  }, 1_200_000);

  it("refuses a second eviction while the PDB is exhausted (429) and moves leadership before the evicted leader's pod goes", async () => {
    const { leader, pods: before } = await steady(180_000);
    const follower = before.find((p) => p.name !== leader.name) as PodState;
    // The disruption controller counts the pods first: one disruption allowed (maxUnavailable 1).
    await until("the PDB allowing a disruption", 60_000, disruptionsAllowed, (n) => n === 1);
    figures.eviction = await observe(async (pods, endpoints) => {
      const evictedAt = performance.now();
      const first = await evict(cluster.release.namespace, leader.name);
      // Straight after: the API server has already taken the allowed disruption off the PDB's
      // status, and the replacement pod cannot be Ready yet.
      const second = await evict(cluster.release.namespace, follower.name);
      expect(first.status, first.message).toBe(201);
      expect(second.status, second.message).toBe(429);
      expect(second.message).toMatch(/disruption budget/);

      const handedOver = await endpoints.waitFor((r) => r.length === 1 && r[0] !== leader.name, 120_000);
      await pods.waitFor((list) => list.some((p) => p.name === leader.name && p.gone), 120_000);
      const goneAt = pods.first((p) => p.name === leader.name && p.gone, evictedAt)?.atMs ?? 0;
      const moves = pods.newLeaders(evictedAt);
      const labelled = moves[0];
      // The lease and the label moved while the evicted pod was still there (its native sidecar
      // hands over on SIGTERM, after the application stopped), and only once.
      expect(moves).toHaveLength(1);
      expect(labelled?.name).toBe(handedOver.ready[0]);
      expect(labelled?.atMs ?? Number.POSITIVE_INFINITY).toBeLessThan(goneAt);

      // As `kubectl drain` retries a refused eviction: once the replacement is Ready, a follower's
      // goes. The one refused above may have become the new leader since (the stopping leader's
      // successor): the retry evicts the old pod that is a follower now.
      // drain retries every 5 s; `until` polls a quarter second, to see when the budget allows it.
      const bystander = before.find((p) => p.name !== leader.name && p.name !== labelled?.name) as PodState;
      const retried = await until(
        "a follower's eviction accepted once the replacement is Ready",
        180_000,
        () => evict(cluster.release.namespace, bystander.name),
        (answer) => answer.status !== 429,
      );
      expect(retried.status, retried.message).toBe(201);
      const followerEvictedAt = performance.now();
      await pods.waitFor((list) => list.some((p) => p.name === bystander.name && p.gone), 120_000);
      const end = performance.now();
      // Evicting a follower does not touch leadership.
      expect(pods.newLeaders(followerEvictedAt)).toHaveLength(0);
      expect(endpoints.durationWhere((r) => r.join() !== labelled?.name, followerEvictedAt, end)).toBe(0);
      return {
        firstEviction: first.status,
        secondEviction: `${second.status}: ${second.message}`,
        leaderlessMs: Math.round(endpoints.durationWhere((r) => r.length === 0, evictedAt, end)),
        twoReadyMs: Math.round(endpoints.durationWhere((r) => r.length >= 2, evictedAt, end)),
        newLeaderEndpointMs: Math.round(handedOver.atMs - evictedAt),
        newLeaderLabelledBeforePodGoneMs: Math.round(goneAt - (labelled?.atMs ?? goneAt)),
        followerEvictionRetriedAfterMs: Math.round(followerEvictedAt - evictedAt),
      };
    });
    expect((figures.eviction as { twoReadyMs: number }).twoReadyMs).toBe(0);
  }, 600_000);

  it("hands over when the leader's application fails its readiness probe (the health gate), never with two ready endpoints", async () => {
    const { leader } = await steady(180_000);
    const ip = await cluster.session.kubectl([
      "get",
      "pod",
      leader.name,
      "-n",
      cluster.release.namespace,
      "-o",
      "jsonpath={.status.podIP}",
    ]);
    figures.appUnready = await observe(async (pods, endpoints) => {
      // From now on the application answers its probe with 503: the kubelet's probe fails twice
      // (periodSeconds 1, failureThreshold 2), the container turns unready, and the sidecar sees it
      // on its own pod; after health.grace (5 s) it hands over to a peer whose application is ready.
      const failedAt = performance.now();
      expect(await get(ip, APP_PORT, 2_000, "/unready")).toMatchObject({ ok: true });
      const handedOver = await endpoints.waitFor((r) => r.length === 1 && r[0] !== leader.name, 120_000);
      const end = performance.now();
      const notReady = pods.first((p) => p.name === leader.name && !p.ready, failedAt);
      const moves = pods.newLeaders(failedAt);
      expect(moves.map((m) => m.name)).toEqual([handedOver.ready[0]]);
      // The unready pod no longer carries the leader label.
      const now = await pods.waitFor(
        (list) => list.some((p) => p.name === leader.name && p.role !== "leader"),
        30_000,
      );
      expect(leaders(now.pods).map((p) => p.name)).toEqual([handedOver.ready[0]]);
      return {
        probeFailingToNewLeaderEndpointMs: Math.round(handedOver.atMs - failedAt),
        podNotReadyAtMs: notReady ? Math.round(notReady.atMs - failedAt) : null,
        leaderlessMs: Math.round(endpoints.durationWhere((r) => r.length === 0, failedAt, end)),
        twoReadyMs: Math.round(endpoints.durationWhere((r) => r.length >= 2, failedAt, end)),
        fences: `${leader.fence} -> ${moves.map((m) => m.fence).join(", ")}`,
      };
    });
    expect((figures.appUnready as { twoReadyMs: number }).twoReadyMs).toBe(0);
    // The application recovers: the pod is Ready again, as a follower (the new leader keeps the lease).
    expect(await get(ip, APP_PORT, 2_000, "/ready-again")).toMatchObject({ ok: true });
    await steady(120_000);
  }, 600_000);

  it("sent nothing of the cluster's addresses out of the machine (the host guard dropped nothing)", async () => {
    expect(await guardDrops()).toBe(0);
  });
});
