// Planned handover as the pods show it: the leader's pod is demoted, the target's labelled, and a
// pod that handed over is labelled again when leadership comes back to it (it was not: the
// sidecar took a handover's demotion for the shutdown's, and never labelled the pod leader again).
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { V1Pod } from "@kubernetes/client-node";
import { afterAll, afterEach, beforeAll, expect, it } from "vitest";
import { type Running, runPglease, startShortLeaseRun } from "../support/cli.ts";
import { createTestDatabase, type TestDatabase } from "../support/database.ts";
import { onEachKubeServer } from "../support/kube-server-suites.ts";
import type { TestKube } from "../support/kube-servers.ts";

const NS = "moves";
let db: TestDatabase;
let kube: TestKube;
let kubeconfigDir: string;
const running: Running[] = [];

async function seed(name: string): Promise<void> {
  await kube.seedPod({
    metadata: {
      name,
      namespace: NS,
      labels: { "app.kubernetes.io/name": "moves", "app.kubernetes.io/instance": "t" },
    },
    spec: { containers: [{ name: "app", image: "app:1" }] },
    status: {
      phase: "Running",
      conditions: [{ type: "Ready", status: "True", lastTransitionTime: new Date() }],
    },
  } as V1Pod);
}

async function sidecar(pod: string): Promise<Running> {
  const { run } = await startShortLeaseRun("moved", {
    DATABASE_URL: db.url,
    KUBECONFIG: join(kubeconfigDir, "config"),
    POD_NAME: pod,
    POD_NAMESPACE: NS,
  });
  running.push(run);
  return run;
}

const role = async (pod: string) => (await kube.pod(NS, pod))?.metadata?.labels?.["pglease.io/role"];

await onEachKubeServer("pglease handover on labelled pods", (server) => {
  beforeAll(async () => {
    db = await createTestDatabase();
    kube = await server.start({ namespace: NS });
    kubeconfigDir = await mkdtemp(join(tmpdir(), "pglease-kubeconfig-"));
    await writeFile(join(kubeconfigDir, "config"), kube.kubeConfig({ namespace: NS }).exportConfig());
  });
  afterEach(async () => {
    for (const r of running.splice(0)) await r.stop("SIGKILL");
  });
  afterAll(async () => {
    await kube?.close();
    await db?.drop();
    if (kubeconfigDir) await rm(kubeconfigDir, { recursive: true, force: true });
  });

  it("moves the leader label to the target, and back to a pod that handed over before", async () => {
    await seed("moves-1");
    await seed("moves-2");
    const one = await sidecar("moves-1");
    await one.waitForLog(/^acquired lease moved/);
    await expect.poll(() => role("moves-1"), { timeout: 10_000 }).toBe("leader");
    const two = await sidecar("moves-2");
    await two.waitForLog(/^lease moved is held by/);
    const env = { DATABASE_URL: db.url };
    await expect
      .poll(async () => (await runPglease(["handover", "moved", "--to", "moves-2"], env)).code, {
        timeout: 10_000,
      })
      .toBe(0);
    await expect
      .poll(async () => [await role("moves-1"), await role("moves-2")], { timeout: 10_000 })
      .toEqual(["follower", "leader"]);
    expect((await runPglease(["handover", "moved", "--to", "moves-1"], env)).code).toBe(0);
    await expect
      .poll(async () => [await role("moves-1"), await role("moves-2")], { timeout: 10_000 })
      .toEqual(["leader", "follower"]);
  });
});
