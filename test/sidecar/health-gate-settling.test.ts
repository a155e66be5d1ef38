// Found while adding the app-unready chaos fault (issue 16): a leader whose application turns
// unready takes a peer that is still in its settle period (it handed over for health a moment ago,
// its application ready again) for a healthy candidate, hands over to it, and the lease has no
// leader until that peer's settle period ends, although the README promises that a leader hands
// over only to a pod that can lead. Real sidecars, a real PostgreSQL, both API servers; the test
// writes the application container's `ready` as the kubelet would.
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { V1Pod } from "@kubernetes/client-node";
import { afterAll, afterEach, beforeAll, expect, it } from "vitest";
import type { StatusDocument } from "../../src/sidecar/http-server.ts";
import { type Running, startShortLeaseRun } from "../support/cli.ts";
import { createTestDatabase, type TestDatabase } from "../support/database.ts";
import { onEachKubeServer } from "../support/kube-server-suites.ts";
import type { TestKube } from "../support/kube-servers.ts";

const NS = "shop";
let db: TestDatabase;
let kube: TestKube;
let kubeconfigDir: string;
const running: Running[] = [];
// A settle period much longer than the lease (3 s): a leaderless lease lasts that long.
const GATE = ["--health-gate", "pod", "--health-grace", "1s", "--health-settle", "12s"];

async function seed(name: string): Promise<void> {
  await kube.seedPod({
    metadata: { name, namespace: NS, labels: { "app.kubernetes.io/name": "orders" } },
    spec: {
      containers: [
        { name: "app", image: "app:1" },
        { name: "pglease", image: "pglease:1" },
      ],
    },
  } as V1Pod);
  await setApp(name, true);
}

async function setApp(name: string, ready: boolean): Promise<void> {
  // The kubelet's write races the sidecar's patches: on a 409 it reads again and retries.
  for (let attempt = 1; ; attempt++) {
    try {
      await kube.mutatePod(NS, name, (pod) => {
        const now = new Date();
        pod.status ??= {};
        pod.status.phase = "Running";
        pod.status.containerStatuses = ["app", "pglease"].map((c, i) => ({
          name: c,
          image: `${c}:1`,
          imageID: `${c}@sha256:${"0".repeat(63)}${i}`,
          ready: c === "app" ? ready : true,
          restartCount: 0,
          state: { running: { startedAt: now } },
        }));
      });
      return;
    } catch (error) {
      if (attempt >= 5 || !String(error).includes("409")) throw error;
    }
  }
}

async function sidecar(pod: string) {
  const { run, port } = await startShortLeaseRun(
    "settling-1",
    { DATABASE_URL: db.url, KUBECONFIG: join(kubeconfigDir, "config"), POD_NAME: pod, POD_NAMESPACE: NS },
    GATE,
  );
  running.push(run);
  return { run, port };
}

/** Why the sidecar does not campaign, from its /status. */
async function notCampaigning(port: number): Promise<string | null> {
  const status = (await (await fetch(`http://127.0.0.1:${port}/status`)).json()) as StatusDocument;
  return status.leases[0]?.notCampaigning ?? null;
}

const leaders = async () => {
  const pods = await Promise.all(["settling-a", "settling-b"].map((name) => kube.pod(NS, name)));
  return pods
    .filter((p) => p?.metadata?.labels?.["pglease.io/role"] === "leader")
    .map((p) => p?.metadata?.name);
};

await onEachKubeServer("health gate: a peer in its settle period", (server) => {
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

  // Failed before the pod showed why it does not campaign (pglease.io/not-campaigning): the leader
  // could not tell a settling peer from a candidate.
  it("is not a healthy candidate: an unready leader does not leave the lease without a leader", async () => {
    await seed("settling-a");
    await seed("settling-b");
    const { run: a, port: aPort } = await sidecar("settling-a");
    await a.waitForLog(/^acquired lease settling-1 with fence \d+$/);
    const { run: b } = await sidecar("settling-b");
    await b.waitForLog(/^lease settling-1 is held by/);

    // a hands over for health; its application is back at once, so it settles for 12 s.
    await setApp("settling-a", false);
    await b.waitForLog(/^acquired lease settling-1 with fence \d+$/);
    await setApp("settling-a", true);
    await expect.poll(() => notCampaigning(aPort), { timeout: 10_000 }).toMatch(/settle period/);

    await setApp("settling-b", false);
    const decided = await b.waitForLog(/^application unready for 1\.0s(: handing over|, keeping the lease)/);
    // a cannot lead for another 10 s: b has no candidate, and keeps the lease as an all-unhealthy
    // fleet does. Today it hands over to a and the lease has no leader until a's settle ends.
    expect(decided.msg).toMatch(/keeping the lease: no peer pod/);
    expect(await leaders()).toEqual(["settling-b"]);
  });
});
