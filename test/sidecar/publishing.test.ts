// `pglease run` as a sidecar in a "cluster": real child processes, a real PostgreSQL, and the
// test API server enforcing the Role that the Helm chart renders. A permission the controller
// needs but the chart forgets fails here.
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { V1Pod, V1Role } from "@kubernetes/client-node";
import pg from "pg";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { kubeTools, renderChartRole } from "../support/chart.ts";
import { type Running, runPglease, startShortLeaseRun } from "../support/cli.ts";
import { createTestDatabase, type TestDatabase } from "../support/database.ts";
import { type KubeApiServer, startKubeApiServer } from "../support/kube-apiserver/index.ts";
import { skipBecause } from "../support/skip.ts";

const tools = await kubeTools();
const skip = skipBecause("publishing suite", !tools.ok && tools.reason);

const NS = "shop";
let db: TestDatabase;
let admin: pg.Pool;
let kube: KubeApiServer;
let kubeconfigDir: string;
let chartRole: V1Role;
const running: Running[] = [];

function seed(name: string): void {
  kube.seedPod({
    metadata: {
      name,
      namespace: NS,
      labels: { "app.kubernetes.io/name": "orders", "app.kubernetes.io/instance": "prod" },
    },
    spec: { containers: [{ name: "app", image: "app:1" }] },
    status: {
      phase: "Running",
      conditions: [
        { type: "Ready", status: "True", lastTransitionTime: new Date() },
        { type: "ContainersReady", status: "True", lastTransitionTime: new Date() },
      ],
    },
  } as V1Pod);
}

async function sidecar(pod: string, lease = "orders-sync") {
  const { run: r } = await startShortLeaseRun(lease, {
    DATABASE_URL: db.url,
    KUBECONFIG: join(kubeconfigDir, "config"),
    POD_NAME: pod,
    POD_NAMESPACE: NS,
  });
  running.push(r);
  return r;
}

const role = (pod: string) => kube.pod(NS, pod)?.metadata?.labels?.["pglease.io/role"];
const fence = (pod: string) => kube.pod(NS, pod)?.metadata?.annotations?.["pglease.io/fence"];
const condition = (pod: string, type: string) =>
  kube.pod(NS, pod)?.status?.conditions?.find((c) => c.type === type)?.status;

describe.skipIf(skip)("pglease run publishing to its pod", () => {
  beforeAll(async () => {
    db = await createTestDatabase();
    admin = new pg.Pool({ connectionString: db.url, max: 1 });
    chartRole = await renderChartRole();
    kube = await startKubeApiServer({ role: chartRole, user: `system:serviceaccount:${NS}:pglease` });
    kubeconfigDir = await mkdtemp(join(tmpdir(), "pglease-kubeconfig-"));
    await writeFile(join(kubeconfigDir, "config"), kube.kubeConfig({ namespace: NS }).exportConfig());
  });

  afterEach(async () => {
    for (const r of running.splice(0)) await r.stop("SIGKILL");
  });

  afterAll(async () => {
    await kube?.close();
    await admin?.end();
    await db?.drop();
    if (kubeconfigDir) await rm(kubeconfigDir, { recursive: true, force: true });
  });

  it("labels the leader, keeps the kubelet's conditions, and on SIGTERM demotes before releasing", async () => {
    seed("orders-a");
    seed("orders-b");
    const a = await sidecar("orders-a");
    await a.waitForLog(/^acquired lease orders-sync with fence 1$/);
    await expect.poll(() => role("orders-a"), { timeout: 10_000 }).toBe("leader");
    expect(fence("orders-a")).toBe("1");
    // The condition goes in its own patch on pods/status, after the label's.
    await expect.poll(() => condition("orders-a", "pglease.io/leader")).toBe("True");
    expect(condition("orders-a", "Ready")).toBe("True");
    expect(condition("orders-a", "ContainersReady")).toBe("True");

    const b = await sidecar("orders-b");
    await b.waitForLog(/^lease orders-sync is held by/);
    await expect.poll(() => role("orders-b"), { timeout: 10_000 }).toBe("follower");
    expect(condition("orders-b", "pglease.io/leader")).toBe("False");

    // Conditions only ever go through a strategic merge patch on pods/status.
    const statusPatches = kube.requests.filter((r) => r.subresource === "status" && r.method === "PATCH");
    expect(statusPatches.length).toBeGreaterThan(0);
    expect(new Set(statusPatches.map((r) => r.contentType))).toEqual(
      new Set(["application/strategic-merge-patch+json"]),
    );

    const exit = await a.stop("SIGTERM");
    expect(exit.code).toBe(0);
    const demotion = kube.requests.find(
      (r) =>
        r.method === "PATCH" &&
        r.name === "orders-a" &&
        !r.subresource &&
        JSON.stringify(r.body ?? null).includes('"pglease.io/role":"follower"') &&
        r.at >
          (kube.requests.find((q) => JSON.stringify(q.body ?? null).includes('"pglease.io/role":"leader"'))
            ?.at ?? 0),
    );
    expect(demotion?.status).toBe(200);
    // Gap, never overlap: a's pod stopped showing leader before b could acquire the lease.
    await b.waitForLog(/^acquired lease orders-sync with fence 2$/);
    const taken = await admin.query(
      "SELECT extract(epoch FROM acquired_at) * 1000 AS at FROM pglease_leases WHERE key = 'orders-sync' AND fence = 2",
    );
    expect(demotion?.at ?? Number.POSITIVE_INFINITY).toBeLessThan(Number(taken.rows[0].at));
    await expect.poll(() => role("orders-b"), { timeout: 10_000 }).toBe("leader");
    expect(fence("orders-b")).toBe("2");
    expect(role("orders-a")).toBe("follower");

    const events = kube.events(NS).map((e) => `${e.involvedObject?.name} ${e.reason}: ${e.message}`);
    expect(events).toEqual(
      expect.arrayContaining([
        expect.stringMatching(/^orders-a LeaderElected: .*fence 1/),
        expect.stringMatching(/^orders-a LeadershipLost: .*fence 1/),
        expect.stringMatching(/^orders-b LeaderElected: .*fence 2/),
      ]),
    );
  });

  it("a new leader demotes a frozen old leader's pod before labelling itself", async () => {
    seed("orders-c");
    seed("orders-d");
    // A pod that still carries the leader label, as a SIGSTOPped or cut-off old leader's would.
    kube.mutatePod(NS, "orders-c", (pod) => {
      pod.metadata = pod.metadata ?? {};
      pod.metadata.labels = { ...pod.metadata.labels, "pglease.io/role": "leader" };
      pod.metadata.annotations = { "pglease.io/lease": "frozen", "pglease.io/fence": "9" };
    });
    kube.clearRequests();
    const d = await sidecar("orders-d", "frozen");
    await d.waitForLog(/^acquired lease frozen/);
    await expect.poll(() => role("orders-d"), { timeout: 10_000 }).toBe("leader");
    expect(role("orders-c")).toBe("follower");
    const patches = kube.requests.filter((r) => r.method === "PATCH" && !r.subresource);
    const demoteC = patches.findIndex((r) => r.name === "orders-c");
    const promoteD = patches.findIndex(
      (r) => r.name === "orders-d" && JSON.stringify(r.body ?? null).includes('"leader"'),
    );
    expect(demoteC).toBeGreaterThanOrEqual(0);
    expect(demoteC).toBeLessThan(promoteD);
  });

  it("a Role without pods/status patch is a clear error at start", async () => {
    seed("orders-e");
    const rules = (chartRole.rules ?? []).map((rule) => ({
      ...rule,
      resources: (rule.resources ?? []).filter((r) => r !== "pods/status"),
    }));
    kube.setRole({ ...chartRole, rules });
    try {
      const out = await runPglease(["run", "--lease", "denied", "--http-addr", "127.0.0.1:0"], {
        DATABASE_URL: db.url,
        KUBECONFIG: join(kubeconfigDir, "config"),
        POD_NAME: "orders-e",
        POD_NAMESPACE: NS,
      });
      expect(out.code).toBe(1);
      expect(out.stderr).toContain("patch pods/status");
      expect(out.stderr).not.toMatch(/\n\s+at /);
    } finally {
      kube.setRole(chartRole);
    }
  });
});
