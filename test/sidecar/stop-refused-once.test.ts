// Review of 3c50195 (issue 28, helm uninstall): a stopping leader whose pod is being deleted
// releases at once when its demotion is refused (401/403). With --no-peer-demotion the new leader
// never takes another pod's label off, so DESIGN §3 says the old leader's demotion comes first.
// A single refusal is not "for good": an authorizer or authenticator hiccup, or RBAC being
// re-applied during an upgrade, refuses one request and grants the retry. Before 3c50195 the
// publisher retried the demotion (with backoff, within its budget) and released only once the
// label was off; now one 403 on a terminating pod releases the lease with the leader label still
// on it, and the follower labels itself: two pods labelled leader until the old pod is gone.
import { expect, it } from "vitest";
import { seedWorkloadPod } from "../support/kubelet.ts";
import { onEachSidecarKubeServer } from "../support/sidecar-kube-suite.ts";

const NS = "refused-once";
const LABELS = { "app.kubernetes.io/name": "orders", "app.kubernetes.io/instance": "prod" };
const ARGS = ["--duration", "10s", "--grace-period", "40s", "--no-peer-demotion"];

await onEachSidecarKubeServer("pglease stopping while one demotion is refused", NS, (suite) => {
  it("a pod being deleted whose demotion is refused once is still demoted before the follower labels itself", async () => {
    const lease = "refused-once";
    await seedWorkloadPod(suite.kube, NS, "once-a", LABELS, true);
    await seedWorkloadPod(suite.kube, NS, "once-b", LABELS, true);
    const a = (await suite.sidecar("once-a", lease, ARGS)).run;
    await a.waitForLog(new RegExp(`^acquired lease ${lease} with fence \\d+$`));
    await expect.poll(() => suite.role("once-a"), { timeout: 10_000 }).toBe("leader");
    const b = (await suite.sidecar("once-b", lease, ARGS)).run;
    await b.waitForLog(new RegExp(`^lease ${lease} is held by`));
    await expect.poll(() => suite.role("once-b"), { timeout: 10_000 }).toBe("follower");

    await suite.kube.deletePod(NS, "once-a", 30); // terminating: its own watch sees deletionTimestamp
    // One transient refusal of the leader's label patch (not its status patch): the retry is granted.
    suite.kube.faults.failNext({
      match: { method: "PATCH", path: /\/pods\/once-a$/ },
      status: 403,
      count: 1,
      message: 'pods "once-a" is forbidden: an authorizer hiccup',
    });
    const exited = a.stop("SIGTERM");
    await b.waitForLog(new RegExp(`^acquired lease ${lease} with fence \\d+$`), 20_000);
    await expect.poll(() => suite.role("once-b"), { timeout: 10_000 }).toBe("leader");
    const roles = { a: await suite.role("once-a"), b: await suite.role("once-b") };
    await exited;
    // Never two pods labelled leader: the old leader's demotion came first.
    expect(roles).toEqual({ a: "follower", b: "leader" });
  });
});
