// Found while adding the app-unready chaos fault (issue 16): a leader whose application turns
// unready takes a peer that is still in its settle period (it handed over for health a moment ago,
// its application ready again) for a healthy candidate, hands over to it, and the lease has no
// leader until that peer's settle period ends, although the README promises that a leader hands
// over only to a pod that can lead. Real sidecars, a real PostgreSQL, both API servers; the test
// writes the application container's `ready` as the kubelet would.
import { expect, it } from "vitest";
import type { StatusDocument } from "../../src/sidecar/http-server.ts";
import { seedWorkloadPod, setAppReady } from "../support/kube/kubelet.ts";
import { onEachSidecarKubeServer } from "../support/kube/sidecar-kube-suite.ts";

const NS = "shop";
// A settle period much longer than the lease (3 s): a leaderless lease lasts that long.
const GATE = ["--health-gate", "pod", "--health-grace", "1s", "--health-settle", "12s"];

/** Why the sidecar does not campaign, from its /status. */
async function notCampaigning(port: number): Promise<string | null> {
  const status = (await (await fetch(`http://127.0.0.1:${port}/status`)).json()) as StatusDocument;
  return status.leases[0]?.notCampaigning ?? null;
}

await onEachSidecarKubeServer("health gate: a peer in its settle period", NS, (suite) => {
  const seed = (name: string) =>
    seedWorkloadPod(suite.kube, NS, name, { "app.kubernetes.io/name": "orders" }, true);
  const setApp = (name: string, ready: boolean) => setAppReady(suite.kube, NS, name, ready);
  const sidecar = (pod: string) => suite.sidecar(pod, "settling-1", GATE);
  const leaders = async () => {
    const pods = await Promise.all(["settling-a", "settling-b"].map((name) => suite.kube.pod(NS, name)));
    return pods
      .filter((p) => p?.metadata?.labels?.["pglease.io/role"] === "leader")
      .map((p) => p?.metadata?.name);
  };

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
