// The chart's Deployment of 3 replicas rolled to a new revision on the API server, the test
// playing the Deployment controller and the kubelet (test/support/kube/rolling-update.ts): each pod's
// sidecar is a real `pglease run` with the environment the chart gives it, and an old pod's
// deletion is its SIGTERM. The old pods go leader first, the order that would move leadership
// once per old pod; the stopping leader hands over to a pod of the new revision, so leadership
// moves once and stays there.
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, afterEach, beforeAll, expect, it } from "vitest";
import {
  type ChartDeployment,
  renderChartDeployment,
  sidecarEnvironment,
} from "../support/kube/chart-deployment.ts";
import { onEachKubeServer } from "../support/kube/kube-server-suites.ts";
import type { TestKube } from "../support/kube/kube-servers.ts";
import { labelEvents, timeline } from "../support/kube/leader-timeline.ts";
import { type DeploymentPod, DeploymentPods } from "../support/kube/rolling-update.ts";
import { createTestDatabase, type TestDatabase } from "../support/postgres/database.ts";
import { type Running, runPglease, startLeaseRun } from "../support/processes/cli.ts";

const NS = "rollout";
const ROLLOUT_BUDGET_MS = 90_000;

await onEachKubeServer("a rolling update of the chart's Deployment", (server) => {
  let db: TestDatabase;
  let kube: TestKube;
  let configDir = "";
  let pods: DeploymentPods;
  const running: Running[] = [];
  beforeAll(async () => {
    db = await createTestDatabase();
    kube = await server.start({ namespace: NS });
    configDir = await mkdtemp(join(tmpdir(), "pglease-rollout-"));
    await writeFile(join(configDir, "config"), kube.kubeConfig({ namespace: NS }).exportConfig());
  });
  afterEach(async () => {
    for (const r of running.splice(0)) await r.stop("SIGKILL");
  });
  afterAll(async () => {
    await kube?.close();
    await db?.drop();
    if (configDir) await rm(configDir, { recursive: true, force: true });
  });

  const leaderOf = async (candidates: DeploymentPod[]) => {
    const roles = await Promise.all(
      candidates.map(async (p) => (await kube.pod(NS, p.name))?.metadata?.labels?.["pglease.io/role"]),
    );
    return candidates.filter((_, i) => roles[i] === "leader");
  };

  it("moves leadership once, to a pod of the new revision", { timeout: 180_000 }, async () => {
    const [v1, v2] = await Promise.all([
      renderChartDeployment({ app: { image: { tag: "1.0" } } }),
      renderChartDeployment({ app: { image: { tag: "2.0" } } }),
    ]);
    expect([v1.replicas, v1.maxSurge, v1.maxUnavailable]).toEqual([3, 1, 0]);
    expect(v2.podTemplateHash).not.toBe(v1.podTemplateHash);
    pods = new DeploymentPods(kube, NS, async (pod, deployment: ChartDeployment) => {
      const env: NodeJS.ProcessEnv = {
        ...sidecarEnvironment(deployment, pod, { DATABASE_URL: db.url }),
        KUBECONFIG: join(configDir, "config"),
      };
      // A short lease and a loopback port: what the chart sets otherwise stays as rendered.
      const { run, port } = await startLeaseRun(env.PGLEASE_LEASE ?? "", "3s", env);
      running.push(run);
      return {
        ready: async () => (await fetch(`http://127.0.0.1:${port}/readyz`).catch(() => null))?.status === 200,
        terminate: async () => {
          const exit = await run.stop("SIGTERM");
          if (exit.code !== 0) throw new Error(`${pod.metadata?.name} exited ${exit.code}: ${exit.stderr}`);
        },
      };
    });
    await pods.scaleUp(v1, ROLLOUT_BUDGET_MS);
    await expect
      .poll(async () => (await leaderOf(pods.live(v1.podTemplateHash))).length, { timeout: 30_000 })
      .toBe(1);
    const [first] = await leaderOf(pods.live(v1.podTemplateHash));
    const history = async () =>
      (
        JSON.parse((await runPglease(["history", "pglease", "--json"], { DATABASE_URL: db.url })).stdout) as {
          history: Array<{ holder: string | null; reason: string }>;
        }
      ).history;
    const before = (await history()).length;
    const mark = kube.requests.length;
    const from = Date.now();

    await pods.roll(
      v1,
      v2,
      async (old) => (await leaderOf(old))[0] ?? (old[0] as DeploymentPod),
      ROLLOUT_BUDGET_MS,
    );
    await expect
      .poll(async () => (await leaderOf(pods.live(v2.podTemplateHash))).length, { timeout: 30_000 })
      .toBe(1);
    // The recording proxy sets a request's status when the API server's answer reaches it, so the
    // new leader's label can show on its pod while its patch still shows status 0: waited for.
    const accepted = () => labelEvents(kube.requests.slice(mark), pods.removedAt);
    await expect
      .poll(() => accepted().some((s) => s.leader && s.pod.includes(`-${v2.podTemplateHash}-`)), {
        timeout: 5_000,
      })
      .toBe(true);
    const shown = timeline(accepted(), first?.name ?? "", from, Date.now());
    expect(shown.changes).toBe(1);
    expect(shown.leaders[1]).toContain(`-${v2.podTemplateHash}-`);
    const changes = (await history()).slice(before).filter((c) => c.holder !== null);
    expect(changes.map((c) => c.reason)).toEqual(["handover"]);
    await pods.drain();
  });
});
