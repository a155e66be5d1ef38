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
      const errors = () => h.logs.filter((l) => l.level === "error").map((l) => l.msg);
      expect(errors()).toContainEqual(
        expect.stringMatching(/^missing RBAC permissions in namespace shop: patch pods\/status;/),
      );
      // start() answers as soon as the check finds the gap; the refused patch follows in the background.
      await expect
        .poll(errors)
        .toContainEqual(expect.stringMatching(/^missing permission: patch pods\/status in namespace shop/));
      expect(h.publisher.state().lastError).toMatch(/^patch pods\/status: HTTP 403/);
      // The part it may write is written: the label is there, only the condition is missing. The
      // label goes out beside the refused status patch, and the refusal ends the pass while the
      // label's patch may still be on its way: waited for, not read once.
      await expect.poll(async () => role(await h.pod()), { timeout: 5_000 }).toBe("follower");
      expect(leaderCondition(await h.pod())).toBeUndefined();
    });

    // A ValidatingAdmissionPolicy refuses with 403 too (the chart's validations say reason
    // Forbidden), but RBAC is fine: "missing permission" sent a real cluster's user to the Role
    // while the policy's pod labels were what did not match. Only the real server enforces
    // admission policies; the in-process one has none.
    it.runIf(kube.name === "real")(
      "names the admission policy and its message, not a missing permission, when a policy refuses the patch",
      async () => {
        // The chart's policy for another workload's pods: the release's labels with name "payments",
        // where this pod's are "orders" (as admissionPolicy.podLabels set to another workload's).
        h = await startHarness(kube, {
          namespace: "policed",
          admissionPolicy: { release: "prod", values: { nameOverride: "payments" } },
          timing: { startTimeoutMs: 500 },
        });
        expect(await h.publisher.start(follower())).toEqual({ published: false, missingPermissions: [] });
        const errors = () => h.logs.filter((l) => l.level === "error").map((l) => l.msg);
        await expect
          .poll(errors)
          .toContainEqual(
            expect.stringMatching(
              /^patch pods(\/status)? refused by admission in namespace policed: pods "orders-0" is forbidden: ValidatingAdmissionPolicy '[^']+' with binding '[^']+' denied request: pglease's service account may change only pods of its own workload \(labels app\.kubernetes\.io\/instance=prod,app\.kubernetes\.io\/name=payments in namespace policed\); .*admissionPolicy\.podLabels/,
            ),
          );
        expect(errors().filter((m) => m.startsWith("missing permission"))).toEqual([]);
        // The policy refuses both patches of a pass, which ends with whichever answers first:
        // each is logged once, and again on the 20th failure, however they alternate.
        const errorLines = () => h.logs.filter((l) => l.level === "error");
        await expect.poll(() => errorLines().map((l) => l.failures), { timeout: 10_000 }).toContainEqual(20);
        const first = errorLines()
          .filter((l) => (l.failures as number) < 20)
          .map((l) => l.msg);
        expect(first.length).toBeGreaterThan(0);
        expect(first).toEqual([...new Set(first)]);
        const token = h.server.kubeConfig().getCurrentUser()?.token;
        expect(token).toBeTruthy();
        expect(JSON.stringify(h.logs)).not.toContain(token);
        expect(h.publisher.state().lastError).toMatch(
          /^patch pods(\/status)?: HTTP 403 pods "orders-0" is forbidden: ValidatingAdmissionPolicy/,
        );
        expect(role(await h.pod())).toBeUndefined();
      },
    );

    // A policy whose validations name no reason refuses with 422 Invalid: the same refusal.
    it.runIf(kube.name === "real")(
      "names the admission policy when it refuses with 422, its validations naming no reason",
      async () => {
        h = await startHarness(kube, {
          namespace: "policed-422",
          admissionPolicy: { release: "prod", values: { nameOverride: "payments" }, withoutReasons: true },
          timing: { startTimeoutMs: 500 },
        });
        expect(await h.publisher.start(follower())).toEqual({ published: false, missingPermissions: [] });
        const errors = () => h.logs.filter((l) => l.level === "error").map((l) => l.msg);
        await expect
          .poll(errors)
          .toContainEqual(
            expect.stringMatching(
              /^patch pods(\/status)? refused by admission in namespace policed-422: pods "orders-0" is forbidden: ValidatingAdmissionPolicy '[^']+' with binding '[^']+' denied request: pglease's service account may change only pods of its own workload/,
            ),
          );
        expect(h.publisher.state().lastError).toMatch(/^patch pods(\/status)?: HTTP 422 /);
        expect(role(await h.pod())).toBeUndefined();
      },
    );

    it("goes on without the check when the API server cannot answer it", async () => {
      h = await startHarness(kube);
      h.server.faults.failNext({ match: { path: /selfsubjectaccessreviews/ }, status: 404, count: 10 });
      expect(await h.publisher.start(follower())).toEqual({ published: true, missingPermissions: [] });
      expect(h.logs.some((l) => l.level === "warn" && l.msg.startsWith("could not check"))).toBe(true);
    });
  });
});
