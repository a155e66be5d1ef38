import { afterEach, describe, expect, it } from "vitest";
import { onEachKubeServer } from "../support/kube/kube-server-suites.ts";
import { chartRules } from "../support/kube/kube-servers.ts";
import { follower, type Harness, leaderCondition, role, startHarness } from "./publisher-harness.ts";

let h: Harness;
afterEach(async () => {
  await h?.close();
});

await onEachKubeServer("publisher RBAC suite", (kube) => {
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
