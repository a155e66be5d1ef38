import type { V1Pod } from "@kubernetes/client-node";
import { afterEach, describe, expect, it } from "vitest";
import { onEachKubeServer } from "../support/kube-server-suites.ts";
import { chartRules } from "../support/kube-servers.ts";
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
      annotations: lease === undefined ? {} : { "pglease.io/lease": lease, "pglease.io/fence": "7" },
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

await onEachKubeServer("publisher peers and RBAC suite", (kube) => {
  describe("gap, never overlap", () => {
    it("clears a stale leader label of the same lease on other pods before labelling itself", async () => {
      h = await startHarness(kube);
      await seedLeader("orders-1", APP_LABELS, "orders-sync");
      await seedLeader("orders-2", APP_LABELS, undefined);
      await seedLeader("orders-3", APP_LABELS, "billing-sync");
      await seedLeader("other-app-0", { "app.kubernetes.io/name": "other" }, "orders-sync");
      await h.publisher.start(follower());
      h.server.clearRequests();

      h.publisher.setDesired(leader(8));
      await until("leader on the pod", () => h.publisher.state().published);

      const order = patchesOf(h.server).map((p) => p.target);
      expect(order).toEqual([
        "orders-1",
        "orders-1/status",
        "orders-2",
        "orders-2/status",
        POD,
        `${POD}/status`,
      ]);
      const list = h.server.requests.find((r) => r.verb === "list");
      expect(list?.query.labelSelector).toBe(
        "app.kubernetes.io/name=orders,app.kubernetes.io/instance=prod,pglease.io/role=leader",
      );
      for (const name of ["orders-1", "orders-2"]) {
        const pod = await h.pod(name);
        expect(role(pod)).toBe("follower");
        expect(leaderCondition(pod)).toMatchObject({ status: "False", reason: "LeaseNotHeld" });
        expect(pod.status?.conditions?.some((c) => c.type === "Ready")).toBe(true);
      }
      expect(role(await h.pod("orders-3"))).toBe("leader");
      expect(role(await h.pod("other-app-0"))).toBe("leader");
      expect(h.patches.filter((p) => p.target === "peer")).toHaveLength(4);
      expect(
        h.logs.some((l) => l.msg.includes("stale leader label") && String(l.pods).includes("orders-1")),
      ).toBe(true);
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

    it("says once that peers cannot be found when the pod has no app labels", async () => {
      h = await startHarness(kube, { podLabels: { app: "orders" } });
      await seedLeader("orders-1", { app: "orders" }, "orders-sync");
      await h.publisher.start(follower());
      h.publisher.setDesired(leader(1));
      await until("leader", () => h.publisher.state().published);
      await h.publisher.demote(1_000);
      h.publisher.setDesired(leader(2));
      await until("leader again", () => h.publisher.state().published);
      expect(h.logs.filter((l) => l.msg.startsWith("peers cannot be found"))).toHaveLength(1);
      expect(h.server.requests.some((r) => r.verb === "list")).toBe(false);
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

  describe("permissions", () => {
    it("starts cleanly with the chart's Role", async () => {
      h = await startHarness(kube);
      expect(await h.publisher.start(follower())).toEqual({ published: true, missingPermissions: [] });
      expect(h.server.requests.filter((r) => r.resource === "selfsubjectaccessreviews")).toHaveLength(6);
    });

    it("names a missing pods/status patch at start, and loudly when the patch is refused", async () => {
      const withoutStatus = (await chartRules()).filter((rule) => !rule.resources?.includes("pods/status"));
      h = await startHarness(kube, {
        rules: withoutStatus,
        timing: { startTimeoutMs: 500 },
      });
      const result = await h.publisher.start(follower());
      expect(result).toEqual({ published: false, missingPermissions: ["patch pods/status"] });
      const errors = () => h.logs.filter((l) => l.level === 50).map((l) => l.msg);
      expect(errors()).toContainEqual(
        expect.stringMatching(/^missing RBAC permissions in namespace shop: patch pods\/status;/),
      );
      // start() answers as soon as the check finds the gap; the refused patch follows in the background.
      await expect
        .poll(errors)
        .toContainEqual(expect.stringMatching(/^missing permission: patch pods\/status in namespace shop/));
      expect(h.publisher.state().lastError).toMatch(/^patch pods\/status: HTTP 403/);
      // The part it may write is written: the label is there, only the condition is missing.
      expect(role(await h.pod())).toBe("follower");
      expect(leaderCondition(await h.pod())).toBeUndefined();
    });

    it("goes on without the check when the API server cannot answer it", async () => {
      h = await startHarness(kube);
      h.server.faults.failNext({ match: { path: /selfsubjectaccessreviews/ }, status: 404, count: 10 });
      expect(await h.publisher.start(follower())).toEqual({ published: true, missingPermissions: [] });
      expect(h.logs.some((l) => l.level === 40 && l.msg.startsWith("could not check"))).toBe(true);
    });
  });
});
