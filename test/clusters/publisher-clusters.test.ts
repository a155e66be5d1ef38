// Across clusters a new leader reaches only its own cluster's API server, so the followers of
// every other cluster take the stale leader label off their own cluster's pods once they learn
// (from the holder identity, `cluster/pod-suffix`) that the lease is held elsewhere; a cluster
// whose API server was away repairs its labels when it answers again.
import { afterEach, describe, expect, it } from "vitest";
import {
  APP_LABELS,
  follower,
  type Harness,
  leader,
  NAMESPACE,
  role,
  startHarness,
  until,
} from "../kube/publisher-harness.ts";
import { onEachKubeServer } from "../support/kube/kube-server-suites.ts";

let h: Harness;
afterEach(async () => {
  await h?.close();
});

const WEST_HOLDER = "west/orders-9-a1b2c3d4";
const EAST_HOLDER = "east/orders-1-a1b2c3d4";

/** A pod of this cluster still labelled leader of orders-sync, as a leader that died leaves it. */
async function seedStaleLeader(name: string): Promise<void> {
  await h.server.seedPod({
    metadata: {
      name,
      namespace: NAMESPACE,
      labels: { ...APP_LABELS, "pglease.io/role": "leader" },
      annotations: { "pglease.io/lease": "orders-sync", "pglease.io/fence": "7" },
    },
  });
}

const annotations = async (name?: string) => (await h.pod(name)).metadata?.annotations ?? {};

await onEachKubeServer("publisher across clusters suite", (kube) => {
  describe("a follower of a named cluster", () => {
    it("leaves its own cluster's leader alone, and demotes it once the lease is held in another cluster", async () => {
      h = await startHarness(kube, { config: { clusterName: "east" } });
      await seedStaleLeader("orders-1");
      await h.publisher.start(follower());

      h.publisher.setDesired(follower(EAST_HOLDER));
      await until("the east holder on the pod", () => h.publisher.state().published);
      expect(await annotations()).toMatchObject({ "pglease.io/leader-cluster": "east" });
      expect(h.patches.filter((p) => p.target === "peer")).toEqual([]);
      expect(role(await h.pod("orders-1"))).toBe("leader");

      h.publisher.setDesired(follower(WEST_HOLDER));
      await until("the stale east leader demoted", async () => role(await h.pod("orders-1")) === "follower");
      expect(await annotations("orders-1")).not.toHaveProperty("pglease.io/fence");
      await until("the west holder on the pod", () => h.publisher.state().published);
      expect(await annotations()).toMatchObject({
        "pglease.io/leader-cluster": "west",
        "pglease.io/holder": WEST_HOLDER,
      });
      const line = h.logs.find((l) => l.msg.includes("held in another cluster"));
      expect(line).toMatchObject({ pods: ["orders-1"], leader: WEST_HOLDER });
      // A sidecar's logger binds `holder` to its own identity: the line must not say another one.
      expect(line).not.toHaveProperty("holder");
    });

    it("repairs its cluster's labels once its API server answers again", async () => {
      h = await startHarness(kube, { config: { clusterName: "east" } });
      await seedStaleLeader("orders-1");
      await h.publisher.start(follower());
      await h.server.faults.goDown();
      h.publisher.setDesired(follower(WEST_HOLDER));
      await until("a failed pass", () => h.publisher.state().lastError !== undefined);
      await h.server.faults.comeBack();
      await until("the stale east leader demoted", async () => role(await h.pod("orders-1")) === "follower");
      await until("the west holder on the pod", () => h.publisher.state().published);
    });

    it("labels itself as before when it becomes the leader, clearing its own cluster first", async () => {
      h = await startHarness(kube, { config: { clusterName: "east" } });
      await seedStaleLeader("orders-1");
      await h.publisher.start(follower(WEST_HOLDER));
      await until("the stale east leader demoted", async () => role(await h.pod("orders-1")) === "follower");
      h.publisher.setDesired({ ...leader(8), holder: "east/orders-0-a1b2" });
      await until("leader on the pod", () => h.publisher.state().published);
      expect(await annotations()).toMatchObject({
        "pglease.io/leader-cluster": "east",
        "pglease.io/fence": "8",
      });
    });
  });

  it("without a cluster name, a follower demotes nobody and shows no leader cluster", async () => {
    h = await startHarness(kube);
    await seedStaleLeader("orders-1");
    await h.publisher.start(follower());
    h.publisher.setDesired(follower(WEST_HOLDER));
    await until("the holder on the pod", () => h.publisher.state().published);
    expect(await annotations()).not.toHaveProperty("pglease.io/leader-cluster");
    // No list of leader-labelled peers (the peer watch's own list selects by the workload's labels only).
    expect(
      h.server.requests.some((r) => r.verb === "list" && r.query.labelSelector?.includes("pglease.io/role")),
    ).toBe(false);
    expect(role(await h.pod("orders-1"))).toBe("leader");
  });
});
