// charts/pglease installed with helm in a real single-node cluster (kubelet, containerd, runc,
// kube-proxy, the Deployment and EndpointSlice controllers), the image built from the project's
// Dockerfile: what a platform team checks on day one. All pods Ready by the kubelet's own probes,
// exactly one labelled leader, the leader Service's EndpointSlice naming exactly that pod, a
// request to its ClusterIP (through kube-proxy's rules) answered by the leader's application, and
// `helm test` passing. Then the leader pod is deleted: the leader Service must never list two
// ready pods, and the time it lists none is measured. At the end, nothing of the cluster's
// addresses left the machine (the host guard's drop count is 0).
import { setTimeout as sleep } from "node:timers/promises";
import { describe, expect, it } from "vitest";
import { watchEndpoints } from "./endpoint-timeline.ts";
import { guardDrops } from "./network.ts";
import { memoryMiB } from "./node.ts";
import { type PodState, watchPods } from "./pod-timeline.ts";
import { type Answer, get } from "./release.ts";
import { releaseSuite } from "./release-suite.ts";
import {
  clusterSkipReason,
  containerPid,
  describePods,
  type PodView,
  pods,
  readyEndpoints,
  until,
} from "./session.ts";

const SUITE = "cluster install";
const skip = (await clusterSkipReason(SUITE)) !== null;
const REPLICAS = 3;
const DELETE_TRIALS = Number(process.env.PGLEASE_CLUSTER_TRIALS ?? 3);

describe.skipIf(skip)("charts/pglease in a real cluster", () => {
  let installStarted: number;
  const cluster = releaseSuite({
    suite: SUITE,
    replicas: REPLICAS,
    // The hook runs with the node up and the install about to start: the boot figures, then the clock.
    values(base) {
      figures.bootMs = cluster.session.bootMs;
      figures.imageBuildMs = cluster.session.image.buildMs;
      installStarted = performance.now();
      // The chart's defaults: crash takeover (opt-in) stays off, so a killed sidecar is followed by
      // its restart in place alone; crash-takeover.test.ts races the two takeovers.
      return base;
    },
    async ready() {
      await until(
        `${REPLICAS} pods Ready`,
        180_000,
        () => pods(cluster.session, cluster.release.namespace, cluster.selector),
        (list) => list.length === REPLICAS && list.every((p) => p.ready),
      ).catch(async (error: Error) => {
        throw new Error(
          `${error.message}\n${await describePods(cluster.session, cluster.release.namespace, cluster.selector)}`,
        );
      });
      figures.installToAllReadyMs = Math.round(performance.now() - installStarted);
      figures.memoryMiB = await memoryMiB();
    },
  });
  const { figures } = cluster;

  const leaders = (list: PodView[]) => list.filter((p) => p.labels["pglease.io/role"] === "leader");

  it("runs every pod Ready by the kubelet's probes, and exactly one labelled leader", async () => {
    const list = await until(
      "one labelled leader",
      60_000,
      () => pods(cluster.session, cluster.release.namespace, cluster.selector),
      (l) => leaders(l).length === 1,
    );
    expect(list.filter((p) => p.ready)).toHaveLength(REPLICAS);
    expect(leaders(list)).toHaveLength(1);
  });

  it("lists exactly the leader pod in the leader Service's EndpointSlice", async () => {
    const [leader] = leaders(await pods(cluster.session, cluster.release.namespace, cluster.selector));
    const endpoints = await until(
      "the leader Service's endpoints",
      30_000,
      () => readyEndpoints(cluster.session, cluster.release.namespace, cluster.release.leaderService),
      (names) => names.length === 1,
    );
    expect(endpoints).toEqual([leader?.name]);
  });

  it("routes a request to the leader Service's ClusterIP to the leader's application", async () => {
    const [leader] = leaders(await pods(cluster.session, cluster.release.namespace, cluster.selector));
    const clusterIp = await cluster.session.kubectl([
      "get",
      "service",
      cluster.release.leaderService,
      "-n",
      cluster.release.namespace,
      "-o",
      "jsonpath={.spec.clusterIP}",
    ]);
    // kube-proxy writes its rules about once a second: wait for them, then every answer is the leader's.
    const started = performance.now();
    await until(
      "an answer through the ClusterIP",
      30_000,
      () => get(clusterIp, 80),
      (a) => a.ok,
    );
    figures.firstAnswerThroughClusterIpMs = Math.round(performance.now() - started);
    for (let i = 0; i < 10; i++) {
      expect(await get(clusterIp, 80)).toEqual({ ok: true, body: leader?.name });
    }
  });

  it("passes helm test", async () => {
    const output = await cluster.session.helm([
      "test",
      cluster.release.name,
      "--namespace",
      cluster.release.namespace,
      "--timeout",
      "3m",
    ]);
    expect(output).toMatch(/Phase:\s+Succeeded/);
  }, 240_000);

  it("hands the leader Service over when the leader pod is deleted, never with two ready endpoints", async () => {
    const clusterIp = await cluster.session.kubectl([
      "get",
      "service",
      cluster.release.leaderService,
      "-n",
      cluster.release.namespace,
      "-o",
      "jsonpath={.spec.clusterIP}",
    ]);
    const trials: Record<string, number>[] = [];
    for (let trial = 0; trial < DELETE_TRIALS; trial++) {
      const list = await until(
        "every pod Ready with one leader",
        180_000,
        () => pods(cluster.session, cluster.release.namespace, cluster.selector),
        (l) => l.length === REPLICAS && l.every((p) => p.ready) && leaders(l).length === 1,
      );
      const old = leaders(list)[0]?.name ?? "";
      const timeline = await watchEndpoints(cluster.release.namespace, cluster.release.leaderService);
      try {
        await timeline.waitFor((ready) => ready.join() === old, 30_000);
        // A client through the ClusterIP all along: a refusal (kube-proxy REJECTs a Service with
        // no ready endpoint) counts as "no leader routed", not as an error to retry away.
        const answers: { atMs: number; answer: Answer }[] = [];
        let clientRuns = true;
        const client = (async () => {
          while (clientRuns) {
            const atMs = performance.now();
            answers.push({ atMs, answer: await get(clusterIp, 80, 1_000) });
            await sleep(50);
          }
        })();
        const deletedAt = performance.now();
        await cluster.session.kubectl([
          "delete",
          "pod",
          old,
          "-n",
          cluster.release.namespace,
          "--wait=false",
        ]);
        const handedOver = await timeline
          .waitFor((ready) => ready.length === 1 && ready[0] !== old, 120_000)
          .catch(async (error: Error) => {
            throw new Error(
              `${error.message}\n${await describePods(cluster.session, cluster.release.namespace, cluster.selector)}`,
            );
          });
        const newLeader = handedOver.ready[0];
        const reached = await until(
          "an answer from the new leader through the ClusterIP",
          30_000,
          async () => answers.find((a) => a.atMs > deletedAt && a.answer.ok && a.answer.body === newLeader),
          (a) => a !== undefined,
        );
        clientRuns = false;
        await client;
        const end = performance.now();
        const during = answers.filter((a) => a.atMs >= deletedAt);
        trials.push({
          leaderlessMs: Math.round(timeline.durationWhere((r) => r.length === 0, deletedAt, end)),
          twoReadyMs: Math.round(timeline.durationWhere((r) => r.length >= 2, deletedAt, end)),
          newLeaderEndpointMs: Math.round(handedOver.atMs - deletedAt),
          clusterIpToNewLeaderMs: Math.round((reached?.atMs ?? end) - deletedAt),
          refusedRequests: during.filter((a) => !a.answer.ok).length,
          oldLeaderAnswers: during.filter((a) => a.answer.ok && a.answer.body === old).length,
        });
        // Every answer came from the old leader or the new one, never from a follower.
        for (const { answer } of during) if (answer.ok) expect([old, newLeader]).toContain(answer.body);
      } finally {
        timeline.stop();
      }
    }
    figures.leaderDeleted = trials;
    for (const t of trials) expect(t.twoReadyMs).toBe(0);
  }, 900_000);

  // The sidecar restarted in place claims through the restart takeover (its pod's restart lock);
  // with crash takeover (opt-in, crash-takeover.test.ts) a peer races it, claiming as soon as the
  // kubelet reports the killed run terminated. One new leader, never two endpoints.
  it("replaces a killed leader sidecar in restart time or sooner (restart or crash takeover), never with two ready endpoints", async () => {
    const list = await until(
      "every pod Ready with one leader",
      180_000,
      () => pods(cluster.session, cluster.release.namespace, cluster.selector),
      (l) => l.length === REPLICAS && l.every((p) => p.ready) && leaders(l).length === 1,
    );
    const leader = leaders(list)[0];
    if (!leader) throw new Error("no leader");
    const fence = Number(leader.annotations["pglease.io/fence"]);
    const restarts = leader.restarts.pglease ?? 0;
    const pid = await containerPid(cluster.session, leader.containerIds.pglease ?? "");
    const timeline = await watchEndpoints(cluster.release.namespace, cluster.release.leaderService);
    const podWatch = await watchPods(cluster.release.namespace, cluster.selector);
    try {
      await timeline.waitFor((ready) => ready.join() === leader.name, 30_000);
      const killedAt = performance.now();
      // SIGKILL from the host: what a crash or the OOM killer does to the sidecar's process.
      process.kill(pid, "SIGKILL");
      const restarted = (p: PodState) =>
        p.name === leader.name && (p.containers.pglease?.restarts ?? 0) > restarts;
      const newTerm = (p: PodState) => (p.fence ?? 0) > fence && p.role === "leader";
      const after = await podWatch
        .waitFor(
          (list) => list.some((p) => restarted(p) && p.ready) && list.some((p) => newTerm(p) && p.ready),
          120_000,
        )
        .catch(async (error: Error) => {
          throw new Error(
            `${error.message}\n${await describePods(cluster.session, cluster.release.namespace, cluster.selector)}`,
          );
        });
      const successor = after.pods.find((p) => newTerm(p) && p.ready);
      if (!successor) throw new Error("no new leader");
      await timeline.waitFor((ready) => ready.join() === successor.name, 60_000);
      const end = performance.now();
      // Where the time goes, each from the kill: the kubelet sees the exit (the pod NotReady),
      // restarts the container, its startup probe passes, the new term (the restarted sidecar's or
      // a peer's), the sidecar's readiness, the pod Ready, the EndpointSlice lists the leader.
      const at = (match: (p: PodState) => boolean) => {
        const event = podWatch.first(match, killedAt);
        return event ? Math.round(event.atMs - killedAt) : null;
      };
      const own = (match: (p: PodState) => boolean) => (p: PodState) => p.name === leader.name && match(p);
      figures.sidecarKilled = {
        takenOverBy:
          successor.name === leader.name ? "restart takeover (same pod)" : "crash takeover (a peer)",
        podNotReadyMs: at(own((p) => !p.ready)),
        sidecarRunningAgainMs: at(own((p) => restarted(p) && p.containers.pglease?.running === true)),
        sidecarStartedMs: at(own((p) => restarted(p) && p.containers.pglease?.started === true)),
        newTermMs: at(newTerm),
        sidecarReadyMs: at(own((p) => restarted(p) && p.containers.pglease?.ready === true)),
        podReadyAgainMs: at(own((p) => restarted(p) && p.ready)),
        endpointBackMs: Math.round((timeline.changes.at(-1)?.atMs ?? end) - killedAt),
        fence: `${fence} -> ${successor.fence}`,
        leaderlessMs: Math.round(timeline.durationWhere((r) => r.length === 0, killedAt, end)),
        twoReadyMs: Math.round(timeline.durationWhere((r) => r.length >= 2, killedAt, end)),
      };
      expect(timeline.durationWhere((r) => r.length >= 2, killedAt, end)).toBe(0);
      // Only the old leader and its one successor were ever the leader Service's endpoint.
      const routed = new Set(timeline.changes.flatMap((c) => c.ready));
      expect([...routed].every((name) => name === leader.name || name === successor.name)).toBe(true);
      // No pod but the successor took the label (it may show twice: the label, then its fence).
      expect(new Set(podWatch.newLeaders(killedAt).map((m) => m.name))).toEqual(new Set([successor.name]));
    } finally {
      timeline.stop();
      podWatch.stop();
    }
  }, 300_000);

  it("sent nothing of the cluster's addresses out of the machine (the host guard dropped nothing)", async () => {
    expect(await guardDrops()).toBe(0);
  });
});
