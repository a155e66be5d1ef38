// `pglease run` as a sidecar in a "cluster": real child processes, a real PostgreSQL, and an API
// server (the real kube-apiserver and the in-process one) enforcing the Role that the Helm chart
// renders, with the chart's ServiceAccount. A permission the controller needs but the chart
// forgets fails here.
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { V1Pod, V1PolicyRule } from "@kubernetes/client-node";
import pg from "pg";
import { afterAll, afterEach, beforeAll, expect, it } from "vitest";
import { onEachKubeServer } from "../support/kube/kube-server-suites.ts";
import { chartRules, type TestKube } from "../support/kube/kube-servers.ts";
import { roleIn } from "../support/kube/leader-timeline.ts";
import { createTestDatabase, type TestDatabase } from "../support/postgres/database.ts";
import { fatalText, type Running, runPglease, startShortLeaseRun } from "../support/processes/cli.ts";

const NS = "shop";
let db: TestDatabase;
let admin: pg.Pool;
let kube: TestKube;
let kubeconfigDir: string;
let rules: V1PolicyRule[];
const running: Running[] = [];

async function seed(name: string): Promise<void> {
  await kube.seedPod({
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

const role = async (pod: string) => (await kube.pod(NS, pod))?.metadata?.labels?.["pglease.io/role"];
const fence = async (pod: string) => (await kube.pod(NS, pod))?.metadata?.annotations?.["pglease.io/fence"];
/** The fence an "acquired lease … with fence N" log line names. */
const fenceIn = (line: Record<string, unknown>) => Number(String(line.msg).match(/fence (\d+)$/)?.[1]);
const condition = async (pod: string, type: string) =>
  (await kube.pod(NS, pod))?.status?.conditions?.find((c) => c.type === type)?.status;
const shown = async (pod: string) => [await role(pod), await condition(pod, "pglease.io/leader")];

await onEachKubeServer("pglease run publishing to its pod", (server) => {
  beforeAll(async () => {
    db = await createTestDatabase();
    admin = new pg.Pool({ connectionString: db.url, max: 1 });
    rules = await chartRules();
    kube = await server.start({ namespace: NS });
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

  it("labels the leader, keeps the kubelet's conditions, and on SIGTERM demotes itself beside the release, before the new leader labels itself", async () => {
    await seed("orders-a");
    await seed("orders-b");
    const a = await sidecar("orders-a");
    const fenceA = fenceIn(await a.waitForLog(/^acquired lease orders-sync with fence \d+$/));
    // The label and the condition are two requests (pods, then pods/status): wait for both, or a
    // read between them sees the label without the condition (a real server's round trip is wide enough).
    await expect.poll(() => shown("orders-a"), { timeout: 10_000 }).toEqual(["leader", "True"]);
    expect(await fence("orders-a")).toBe(String(fenceA));
    expect(await condition("orders-a", "Ready")).toBe("True");
    expect(await condition("orders-a", "ContainersReady")).toBe("True");

    const b = await sidecar("orders-b");
    await b.waitForLog(/^lease orders-sync is held by/);
    await expect.poll(() => shown("orders-b"), { timeout: 10_000 }).toEqual(["follower", "False"]);

    // Conditions only ever go through a strategic merge patch on pods/status.
    const statusPatches = kube.requests.filter((r) => r.subresource === "status" && r.method === "PATCH");
    expect(statusPatches.length).toBeGreaterThan(0);
    expect(new Set(statusPatches.map((r) => r.contentType))).toEqual(
      new Set(["application/strategic-merge-patch+json"]),
    );

    const exit = await a.stop("SIGTERM");
    expect(exit.code).toBe(0);
    const led = kube.requests.find((q) => q.name === "orders-a" && roleIn(q.body) === "leader")?.at ?? 0;
    // a's own demotion (a merge patch; a new leader's is a JSON patch) went out and was stored.
    const demotion = kube.requests.find(
      (r) =>
        r.method === "PATCH" &&
        r.name === "orders-a" &&
        !r.subresource &&
        r.contentType === "application/merge-patch+json" &&
        roleIn(r.body) === "follower" &&
        r.at > led,
    );
    expect(demotion?.status).toBe(200);
    const fenceB = fenceIn(await b.waitForLog(/^acquired lease orders-sync with fence \d+$/));
    expect(fenceB).toBeGreaterThan(fenceA);
    await expect.poll(() => role("orders-b"), { timeout: 10_000 }).toBe("leader");
    // Gap, never overlap: a released without waiting for its demotion (sent beside the release),
    // so b's label waited until a's pod no longer showed leader (a's own patch or b's, first).
    // The recording proxy sets a request's status when the API server's answer reaches it, so b's
    // label can show on its pod while its patch still shows status 0: waited for, not read once.
    const aOff = () =>
      kube.requests.find(
        (r) =>
          r.method === "PATCH" &&
          r.name === "orders-a" &&
          !r.subresource &&
          r.status === 200 &&
          roleIn(r.body) === "follower" &&
          r.at > led,
      );
    const bOn = () =>
      kube.requests.find(
        (r) =>
          r.method === "PATCH" &&
          r.name === "orders-b" &&
          !r.subresource &&
          r.status === 200 &&
          roleIn(r.body) === "leader",
      );
    await expect
      .poll(() => [aOff() !== undefined, bOn() !== undefined], { timeout: 5_000 })
      .toEqual([true, true]);
    expect(aOff()?.at ?? Number.POSITIVE_INFINITY).toBeLessThan(bOn()?.at ?? 0);
    expect(await fence("orders-b")).toBe(String(fenceB));
    expect(await role("orders-a")).toBe("follower");

    // An event goes out once the pod's watch shows the change it reports, so it may land just
    // after this test's own read of the label: waited for, not read once.
    const events = async () =>
      (await kube.events(NS)).map((e) => `${e.involvedObject?.name} ${e.reason}: ${e.message}`);
    await expect
      .poll(events, { timeout: 10_000 })
      .toEqual(
        expect.arrayContaining([
          expect.stringMatching(new RegExp(`^orders-a LeaderElected: .*fence ${fenceA}\\b`)),
          expect.stringMatching(new RegExp(`^orders-a LeadershipLost: .*fence ${fenceA}\\b`)),
          expect.stringMatching(new RegExp(`^orders-b LeaderElected: .*fence ${fenceB}\\b`)),
        ]),
      );
  });

  it("a new leader demotes a frozen old leader's pod before labelling itself", async () => {
    await seed("orders-c");
    await seed("orders-d");
    // A pod that still carries the leader label, as a SIGSTOPped or cut-off old leader's would.
    await kube.mutatePod(NS, "orders-c", (pod) => {
      pod.metadata = pod.metadata ?? {};
      pod.metadata.labels = { ...pod.metadata.labels, "pglease.io/role": "leader" };
      pod.metadata.annotations = { "pglease.io/lease": "frozen", "pglease.io/fence": "9" };
    });
    kube.clearRequests();
    const d = await sidecar("orders-d", "frozen");
    await d.waitForLog(/^acquired lease frozen/);
    await expect.poll(() => role("orders-d"), { timeout: 10_000 }).toBe("leader");
    expect(await role("orders-c")).toBe("follower");
    const patches = kube.requests.filter((r) => r.method === "PATCH" && !r.subresource);
    const demoteC = patches.findIndex((r) => r.name === "orders-c");
    const promoteD = patches.findIndex(
      (r) => r.name === "orders-d" && JSON.stringify(r.body ?? null).includes('"leader"'),
    );
    expect(demoteC).toBeGreaterThanOrEqual(0);
    expect(demoteC).toBeLessThan(promoteD);
  });

  it("a leader whose pod carries superseded-by from before the fence sequence went back labels itself after one renew", async () => {
    await seed("orders-r");
    // As after a restore or a new lease table: far above any fence this database hands out.
    await kube.mutatePod(NS, "orders-r", (pod) => {
      pod.metadata = pod.metadata ?? {};
      pod.metadata.annotations = { "pglease.io/superseded-by": "1000000" };
    });
    const r = await sidecar("orders-r", "rewound");
    const acquired = await r.waitForLog(/^acquired lease rewound/);
    // The bound: one renew interval (1 s with a 3 s lease) plus one publisher backoff step (4 s at
    // most); 10 s leaves room for a loaded host. On main the pod was never labelled.
    await expect.poll(() => role("orders-r"), { timeout: 10_000, interval: 50 }).toBe("leader");
    const pod = await kube.pod(NS, "orders-r");
    expect(pod?.metadata?.annotations?.["pglease.io/superseded-by"]).toBe(String(fenceIn(acquired) - 1));
  });

  it("a Role without pods/status patch is a clear error at start", async () => {
    await seed("orders-e");
    const withoutStatus = rules
      .map((rule) => ({ ...rule, resources: (rule.resources ?? []).filter((r) => r !== "pods/status") }))
      // A rule left without resources goes: a real API server refuses a Role holding one (422).
      .filter((rule) => rule.resources.length > 0);
    await kube.setRules(withoutStatus);
    try {
      const out = await runPglease(["run", "--lease", "denied", "--http-addr", "127.0.0.1:0"], {
        DATABASE_URL: db.url,
        KUBECONFIG: join(kubeconfigDir, "config"),
        POD_NAME: "orders-e",
        POD_NAMESPACE: NS,
      });
      expect(out.code).toBe(1);
      expect(fatalText(out)).toContain("patch pods/status");
      expect(fatalText(out)).not.toMatch(/\n\s+at /);
    } finally {
      await kube.setRules(rules);
    }
  });

  it("a pod whose peers cannot be found is a configuration error naming the flags; --no-peer-demotion opts out", async () => {
    await kube.seedPod({
      metadata: { name: "bare-pod", namespace: NS },
      spec: { containers: [{ name: "app", image: "app:1" }] },
      status: { phase: "Running" },
    } as V1Pod);
    const env = {
      DATABASE_URL: db.url,
      KUBECONFIG: join(kubeconfigDir, "config"),
      POD_NAME: "bare-pod",
      POD_NAMESPACE: NS,
    };
    const refused = await runPglease(["run", "--lease", "bare", "--http-addr", "127.0.0.1:0"], env);
    expect(refused.code).toBe(2);
    expect(fatalText(refused)).toMatch(
      /--peer-selector \(PGLEASE_PEER_SELECTOR\): peerSelector is not set and pod bare-pod/,
    );
    expect(fatalText(refused)).toContain("or run with --no-peer-demotion");

    const { run: optedOut } = await startShortLeaseRun("bare", env, ["--no-peer-demotion"]);
    running.push(optedOut);
    await optedOut.waitForLog(/^acquired lease bare with fence \d+$/);
    await expect.poll(() => role("bare-pod"), { timeout: 10_000 }).toBe("leader");
  });
});
