import type { V1Pod } from "@kubernetes/client-node";
import { afterEach, describe, expect, it } from "vitest";
import { onEachKubeServer } from "../support/kube/kube-server-suites.ts";
import { ManualClock } from "../support/manual-clock.ts";
import {
  APP_LABELS,
  follower,
  type Harness,
  leader,
  leaderCondition,
  NAMESPACE,
  POD,
  patchesOf,
  role,
  startHarness,
  until,
} from "./publisher-harness.ts";

let h: Harness;
afterEach(async () => {
  await h?.close();
});

async function seedLeader(
  name: string,
  labels: Record<string, string>,
  lease: string | undefined,
): Promise<void> {
  const pod: V1Pod = {
    metadata: {
      name,
      namespace: NAMESPACE,
      labels: { ...labels, "pglease.io/role": "leader" },
      annotations:
        lease === undefined
          ? {}
          : { "pglease.io/lease": lease, "pglease.io/fence": "7", "pglease.io/holder": `${name}-old` },
    },
  };
  const seeded = await h.server.seedPod(pod);
  await h.server.mutatePod(NAMESPACE, name, (p) => {
    p.status?.conditions?.push({
      type: "pglease.io/leader",
      status: "True",
      reason: "LeaseHeld",
      message: `holds lease ${lease} with fence 7`,
      lastTransitionTime: new Date("2025-01-01T00:00:00Z"),
    });
  });
  expect(seeded.metadata?.name).toBe(name);
}

/** The watches of the peer view (its own pod's has a field selector). */
const peerWatches = () => h.server.requests.filter((r) => r.verb === "watch" && r.query.labelSelector);

/** Every watch of the peers refused from now on: the peer view never knows them, peers are listed. */
async function refusePeerWatches(): Promise<void> {
  h.server.faults.failNext({
    match: (r) => r.watch && r.query.get("labelSelector") !== null,
    status: 500,
    count: 1_000,
  });
  // The one streaming now ends; its successors are refused.
  h.server.faults.dropWatches();
  await until("a refused watch of the peers", () => peerWatches().some((w) => w.status === 500));
}

await onEachKubeServer("publisher peers suite", (kube) => {
  describe("gap, never overlap", () => {
    it("clears a stale leader label of the same lease on other pods before labelling itself", async () => {
      h = await startHarness(kube);
      await seedLeader("orders-1", APP_LABELS, "orders-sync");
      await seedLeader("orders-2", APP_LABELS, undefined);
      await seedLeader("orders-3", APP_LABELS, "billing-sync");
      await seedLeader("other-app-0", { "app.kubernetes.io/name": "other" }, "orders-sync");
      await h.publisher.start(follower());
      await until("a watch of the peers", () => peerWatches().length > 0);
      const watched = peerWatches()[0]?.query.labelSelector;
      h.server.clearRequests();

      h.publisher.setDesired(leader(8));
      await until("leader on the pod", () => h.publisher.state().published);

      // Every peer's label and condition together (in any order), itself last.
      const order = patchesOf(h.server).map((p) => p.target);
      expect([order.slice(0, 4).sort(), order.slice(4).sort()]).toEqual([
        ["orders-1", "orders-1/status", "orders-2", "orders-2/status"],
        [POD, `${POD}/status`],
      ]);
      expect(order).toHaveLength(6);
      // A term's first pass lists its peers from the API server although its watch of them is
      // healthy: a list without resourceVersion is a quorum read, so a peer labelled leader that a
      // lagging watch has not shown yet is still found (a stopping leader no longer waits for its
      // own demotion: this list is what keeps two pods from being labelled). It comes first.
      expect(watched).toBe("app.kubernetes.io/name=orders,app.kubernetes.io/instance=prod");
      const lists = h.server.requests.filter((r) => r.verb === "list");
      expect(lists.map((r) => r.query)).toEqual([{ labelSelector: watched }]);
      const firstPatch = h.server.requests.findIndex((r) => r.method === "PATCH");
      expect(h.server.requests.indexOf(lists[0] as (typeof lists)[number])).toBeLessThan(firstPatch);
      for (const name of ["orders-1", "orders-2"]) {
        const pod = await h.pod(name);
        expect(role(pod)).toBe("follower");
        expect(leaderCondition(pod)).toMatchObject({ status: "False", reason: "LeaseNotHeld" });
        expect(pod.status?.conditions?.some((c) => c.type === "Ready")).toBe(true);
      }
      // A reader of the old leader's fence (downward API, kubectl) must not see it any more; the
      // new term's fence off says an older term's label on its way must not land.
      expect((await h.pod("orders-1")).metadata?.annotations).toEqual({
        "pglease.io/lease": "orders-sync",
        "pglease.io/superseded-by": "8",
      });
      expect(role(await h.pod("orders-3"))).toBe("leader");
      expect(role(await h.pod("other-app-0"))).toBe("leader");
      expect(h.patches.filter((p) => p.target === "peer")).toHaveLength(4);
      expect(
        h.logs.some((l) => l.msg.includes("stale leader label") && String(l.pods).includes("orders-1")),
      ).toBe(true);
    });

    it("sends a stale peer's label and condition patches at once, and labels itself after both", async () => {
      h = await startHarness(kube);
      await seedLeader("orders-1", APP_LABELS, "orders-sync");
      await h.publisher.start(follower());
      h.server.clearRequests();
      const held = h.server.faults.hang({ match: { method: "PATCH", path: /\/pods\/orders-1(\/status)?$/ } });
      h.publisher.setDesired(leader(8));
      // One round trip for the peer, not two: both are in flight together.
      await held.waitForHeld(2);
      const sent = h.server.requests.filter((r) => r.method === "PATCH" && r.name === "orders-1");
      expect(sent.map((r) => r.subresource ?? "metadata").sort()).toEqual(["metadata", "status"]);
      expect(h.server.requests.some((r) => r.method === "PATCH" && r.name === POD)).toBe(false);
      held.release();
      await until("leader on the pod", () => h.publisher.state().published);
      expect(leaderCondition(await h.pod("orders-1"))).toMatchObject({ status: "False" });
    });

    it("demotes a stale peer that demotes itself meanwhile with its first patch: no refusal, no second list", async () => {
      h = await startHarness(kube);
      await seedLeader("orders-1", APP_LABELS, "orders-sync");
      await h.publisher.start(follower());
      h.server.clearRequests();
      const held = h.server.faults.hang({ match: { method: "PATCH", path: /\/pods\/orders-1(\/status)?$/ } });
      h.publisher.setDesired(leader(8));
      // The list showed orders-1 labelled leader; its demotion waits at the server while the
      // stopping leader's own demotion, sent beside its release, lands first (a graceful handover).
      await held.waitForHeld(2);
      await h.server.mutatePod(NAMESPACE, "orders-1", (pod) => {
        pod.metadata = {
          ...pod.metadata,
          labels: { ...pod.metadata?.labels, "pglease.io/role": "follower" },
          annotations: { "pglease.io/lease": "orders-sync" },
        };
      });
      held.release();
      await until("leader on the pod", () => h.publisher.state().published);

      // Still a demotion and a fence off: the old term's label cannot come back.
      expect((await h.pod("orders-1")).metadata?.annotations).toEqual({
        "pglease.io/lease": "orders-sync",
        "pglease.io/superseded-by": "8",
      });
      expect(role(await h.pod("orders-1"))).toBe("follower");
      // One round trip for the peer: a refusal would cost a second list and a second patch.
      expect(h.patches.filter((p) => p.target === "peer").map((p) => p.ok)).toEqual([true, true]);
      expect(h.server.requests.filter((r) => r.verb === "list")).toHaveLength(1);
    });

    it("does not label itself leader while the stale peer cannot be demoted", async () => {
      h = await startHarness(kube, { timing: { requestTimeoutMs: 300 } });
      await seedLeader("orders-1", APP_LABELS, "orders-sync");
      await h.publisher.start(follower());
      h.server.clearRequests();
      const held = h.server.faults.hang({ match: { method: "PATCH", path: /\/pods\/orders-1$/ } });
      h.publisher.setDesired(leader(8));
      await held.waitForHeld(2);
      expect(role(await h.pod())).toBe("follower");
      expect(h.server.requests.some((r) => r.method === "PATCH" && r.name === POD)).toBe(false);
      held.release();
      await until("leader on the pod", () => h.publisher.state().published);
      expect(role(await h.pod("orders-1"))).toBe("follower");
    });

    it("stops demoting, and does not label itself, once it no longer leads after listing", async () => {
      let leads = true;
      const asked: unknown[] = [];
      h = await startHarness(kube, {
        stillLeads: (target) => {
          asked.push(target);
          return leads;
        },
      });
      await seedLeader("orders-1", APP_LABELS, "orders-sync");
      await seedLeader("orders-2", APP_LABELS, "orders-sync");
      await h.publisher.start(follower());
      await refusePeerWatches();
      h.server.clearRequests();
      const list = h.server.faults.hang({ match: { method: "GET", path: /\/pods$/, watch: false } });
      h.publisher.setDesired(leader(8));
      await list.waitForHeld(1);
      // Without a healthy watch of the peers, they are listed at the handover: all of them, as
      // each is fenced off, labelled or not.
      const listed = h.server.requests.find((r) => r.verb === "list" && r.query.labelSelector);
      expect(listed?.query.labelSelector).toBe(
        "app.kubernetes.io/name=orders,app.kubernetes.io/instance=prod",
      );
      leads = false;
      list.release();
      await until("the pass to give up", () => /no longer leads/.test(h.publisher.state().lastError ?? ""));
      expect(patchesOf(h.server)).toEqual([]);
      expect(role(await h.pod())).toBe("follower");
      expect(role(await h.pod("orders-1"))).toBe("leader");
      expect(asked).toContainEqual(leader(8));

      // The next term that does lead goes through.
      leads = true;
      h.publisher.setDesired(leader(9));
      await until("leader on the pod", () => h.publisher.state().published);
      expect(role(await h.pod("orders-1"))).toBe("follower");
      expect(role(await h.pod("orders-2"))).toBe("follower");
    });

    it("refuses to start when peers cannot be found and nobody opted out", async () => {
      h = await startHarness(kube, { podLabels: { app: "orders" } });
      await expect(h.publisher.start(follower())).rejects.toThrow(
        /^peerSelector is not set and pod orders-0 has neither .* set peerSelector to the selector .*, or to null to opt out/,
      );
      // Stopped on the way out: nothing left running for the caller to clean up.
      await until("the pod watch closed", () => h.server.openWatches === 0);
    });

    it("does not label itself leader when peers cannot be found and the pod could not be read at start", async () => {
      const clock = new ManualClock();
      h = await startHarness(kube, {
        clock,
        podLabels: { app: "orders" },
        timing: { startTimeoutMs: 60_000, requestTimeoutMs: 120_000 },
      });
      const reads = h.server.faults.hang({ match: { method: "GET" } });
      const starting = h.publisher.start(follower());
      await reads.waitForHeld(2);
      clock.advance(60_000);
      expect(await starting).toEqual({ published: false, missingPermissions: [] });
      reads.release();
      await until("follower on the pod", () => h.publisher.state().published);

      h.publisher.setDesired(leader(1));
      await until("the configuration error", () =>
        /^peerSelector is not set/.test(h.publisher.state().lastError ?? ""),
      );
      expect(role(await h.pod())).toBe("follower");
      expect(h.logs.some((l) => l.level === "error" && l.msg.startsWith("peerSelector is not set"))).toBe(
        true,
      );
    });

    it("demotes nobody when told so with peerSelector: null", async () => {
      h = await startHarness(kube, { podLabels: { app: "orders" }, config: { peerSelector: null } });
      await seedLeader("orders-1", { app: "orders" }, "orders-sync");
      await h.publisher.start(follower());
      h.publisher.setDesired(leader(1));
      await until("leader", () => h.publisher.state().published);
      // The only list is of its own pod, by name, where its watch starts.
      expect(h.server.requests.filter((r) => r.verb === "list").map((r) => r.query)).toEqual([
        expect.objectContaining({ fieldSelector: `metadata.name=${POD}` }),
      ]);
      expect(h.server.requests.some((r) => r.verb === "list" && r.query.labelSelector)).toBe(false);
      expect(role(await h.pod("orders-1"))).toBe("leader");
      expect(h.logs.filter((l) => l.level !== "debug" && l.level !== "info")).toEqual([]);
    });

    it("still lists the peers for the health gate's candidates with peerSelector: null", async () => {
      h = await startHarness(kube, { config: { peerSelector: null } });
      await h.server.seedPod({ metadata: { name: "orders-1", namespace: NAMESPACE, labels: APP_LABELS } });
      await h.server.seedPod({
        metadata: { name: "other-0", namespace: NAMESPACE, labels: { app: "other" } },
      });
      await h.publisher.start(follower());
      // The selector built from the pod's own labels: demotion is off, finding candidates is not.
      expect((await h.publisher.listPeers()).map((p) => p.metadata?.name)).toEqual(["orders-1"]);
      expect(h.server.requests.find((r) => r.query.labelSelector)?.query.labelSelector).toBe(
        "app.kubernetes.io/name=orders,app.kubernetes.io/instance=prod",
      );
    });

    it("uses a configured peer selector", async () => {
      h = await startHarness(kube, { podLabels: { app: "orders" }, config: { peerSelector: "app=orders" } });
      await seedLeader("orders-1", { app: "orders" }, "orders-sync");
      await h.publisher.start(follower());
      h.publisher.setDesired(leader(1));
      await until("leader", () => h.publisher.state().published);
      expect(role(await h.pod("orders-1"))).toBe("follower");
    });
  });
});
