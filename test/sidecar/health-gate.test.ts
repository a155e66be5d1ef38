// Leadership follows the application's health, on real `pglease run` processes, a real
// PostgreSQL and an API server (the real kube-apiserver and the in-process one). The test plays
// the kubelet: it writes the application container's `ready` into each pod's status, and the
// sidecar's status where a kubelet does (a native sidecar's in initContainerStatuses).
import { expect, it } from "vitest";
import type { StatusDocument } from "../../src/sidecar/http-server.ts";
import { seedWorkloadPod, setAppReady } from "../support/kube/kubelet.ts";
import { onEachSidecarKubeServer } from "../support/kube/sidecar-kube-suite.ts";

const NS = "shop";
const LABELS = { "app.kubernetes.io/name": "orders", "app.kubernetes.io/instance": "prod" };
const GATE = ["--health-gate", "pod", "--health-grace", "1s", "--health-settle", "2s"];

// On the real server under the chart's admission policy for these pods' labels: the role label,
// the not-campaigning annotation and the condition that pglease writes must all pass it.
const UNDER_POLICY = {
  namespace: NS,
  admissionPolicy: { release: "prod", values: { nameOverride: "orders" } },
};

await onEachSidecarKubeServer("pglease run with the health gate", UNDER_POLICY, (suite) => {
  const seed = (name: string, ready: boolean) => seedWorkloadPod(suite.kube, NS, name, LABELS, ready);
  const setApp = (name: string, ready: boolean) => setAppReady(suite.kube, NS, name, ready);
  const sidecar = (pod: string, lease: string, extra: string[] = GATE) => suite.sidecar(pod, lease, extra);
  const role = suite.role;

  it("a leader whose application stays unready hands over to a pod whose application is ready", async () => {
    await seed("health-a", true);
    await seed("health-b", true);
    const a = await sidecar("health-a", "health-1");
    await a.run.waitForLog(/^acquired lease health-1 with fence \d+$/);
    await expect.poll(() => role("health-a"), { timeout: 10_000 }).toBe("leader");
    const b = await sidecar("health-b", "health-1");
    await b.run.waitForLog(/^lease health-1 is held by/);

    await setApp("health-a", false);
    const handedOver = await a.run.waitForLog(/^handed over lease health-1/);
    expect(handedOver.msg).toMatch(
      /^handed over lease health-1 \(fence \d+\): application unready for more than 1\.0s \(container app not ready\)$/,
    );
    await a.run.waitForLog(/handing over, health-b is a healthy candidate$/);
    await b.run.waitForLog(/^acquired lease health-1 with fence \d+$/);
    await expect.poll(() => role("health-b"), { timeout: 10_000 }).toBe("leader");
    expect(await role("health-a")).toBe("follower");
    // The event goes out once health-a's watch shows its demotion: waited for, not read once.
    const lost = async () =>
      (await suite.kube.events(NS)).find(
        (e) => e.involvedObject?.name === "health-a" && e.reason === "LeadershipLost",
      )?.message;
    await expect.poll(lost, { timeout: 10_000 }).toMatch(/application unready/);

    // /status shows the gate's input; the unready pod does not campaign.
    const status = (await (await fetch(`http://127.0.0.1:${a.port}/status`)).json()) as StatusDocument;
    expect(status.health).toMatchObject({
      source: "pod",
      ready: false,
      detail: "container app not ready",
      handingOver: false, // the handover is complete: this pod no longer leads
      handovers: 1,
    });
    expect(status.leases[0]?.notCampaigning).toMatch(/^application unready/);
    const metrics = await (await fetch(`http://127.0.0.1:${a.port}/metrics`)).text();
    expect(metrics).toMatch(/^pglease_health_handovers_total 1$/m);
    expect(metrics).toMatch(/^pglease_application_ready\{gate="pod"\} 0$/m);
  });

  it("hands over with a classic sidecar too (sidecar.native=false: its status in containerStatuses)", async () => {
    await seedWorkloadPod(suite.kube, NS, "classic-a", LABELS, true, "container");
    await seedWorkloadPod(suite.kube, NS, "classic-b", LABELS, true, "container");
    const a = await sidecar("classic-a", "health-4");
    await a.run.waitForLog(/^acquired lease health-4 with fence \d+$/);
    const b = await sidecar("classic-b", "health-4");
    await b.run.waitForLog(/^lease health-4 is held by/);
    await setApp("classic-a", false);
    await a.run.waitForLog(/handing over, classic-b is a healthy candidate$/);
    await b.run.waitForLog(/^acquired lease health-4 with fence \d+$/);
  });

  it("an unready fleet keeps its leader, which hands over once a peer's application is ready", async () => {
    await seed("fleet-a", true);
    await seed("fleet-b", false);
    const a = await sidecar("fleet-a", "health-2");
    await a.run.waitForLog(/^acquired lease health-2 with fence \d+$/);
    const b = await sidecar("fleet-b", "health-2");
    await b.run.waitForLog(/^not campaigning for lease health-2 \(held by .*\): application unready/);

    await setApp("fleet-a", false);
    await a.run.waitForLog(/keeping the lease: no peer pod has a ready application/);
    expect(await role("fleet-a")).toBe("leader");

    await setApp("fleet-b", true);
    await a.run.waitForLog(/handing over, fleet-b is a healthy candidate$/);
    await b.run.waitForLog(/^acquired lease health-2 with fence \d+$/);
    await expect.poll(() => role("fleet-b"), { timeout: 10_000 }).toBe("leader");
  });

  it("does not campaign at start until its application is ready; strict mode hands over without a candidate", async () => {
    await seed("start-a", false);
    const a = await sidecar("start-a", "health-3", [...GATE, "--health-strict"]);
    await a.run.waitForLog(
      /^not campaigning for lease health-3 \(free\): application unready \(container app not ready\)$/,
    );
    await setApp("start-a", true);
    await a.run.waitForLog(/^acquired lease health-3 with fence \d+$/);

    await setApp("start-a", false);
    await a.run.waitForLog(/handing over \(strict: no peer pod has a ready application\)$/);
    await a.run.waitForLog(/^handed over lease health-3/);
    await expect.poll(() => role("start-a"), { timeout: 10_000 }).toBe("follower");
  });
});
