// Review of 3c50195 (issue 28, helm uninstall): a stopping leader whose pod is being deleted
// releases at once when its demotion is refused (401/403). With --no-peer-demotion the new leader
// never takes another pod's label off, so DESIGN §3 says the old leader's demotion comes first.
// A single refusal is not "for good": an authorizer or authenticator hiccup, or RBAC being
// re-applied during an upgrade, refuses one request and grants the retry. Before 3c50195 the
// publisher retried the demotion (with backoff, within its budget) and released only once the
// label was off; now one 403 on a terminating pod releases the lease with the leader label still
// on it, and the follower labels itself: two pods labelled leader until the old pod is gone.
import { expect, it } from "vitest";
import { labelEvents } from "../support/kube/leader-timeline.ts";
import { onEachSidecarKubeServer } from "../support/kube/sidecar-kube-suite.ts";

const NS = "refused-once";
const LABELS = { "app.kubernetes.io/name": "orders", "app.kubernetes.io/instance": "prod" };
const LONG = ["--duration", "10s", "--grace-period", "40s"];

await onEachSidecarKubeServer("pglease stopping while one demotion is refused", NS, (suite) => {
  /** The leader (a) stops on a terminating pod while its first label patch is refused once. */
  async function refusedOnce(prefix: string, lease: string, args: readonly string[]) {
    const [podA, podB] = [`${prefix}-a`, `${prefix}-b`];
    const { a, b } = await suite.pair(prefix, lease, LABELS, args);

    suite.kube.clearRequests();
    // One transient refusal of the leader's label patch (not its status patch): the retry is granted.
    suite.kube.faults.failNext({
      match: { method: "PATCH", path: new RegExp(`/pods/${podA}$`) },
      status: 403,
      count: 1,
      message: `pods "${podA}" is forbidden: an authorizer hiccup`,
    });
    // Terminating: its own watch sees deletionTimestamp and the leader hands over (its demotion first).
    await suite.kube.deletePod(NS, podA, 30);
    const exited = a.stop("SIGTERM");
    await b.waitForLog(new RegExp(`^acquired lease ${lease} with fence \\d+$`), 20_000);
    await expect.poll(() => suite.role(podB), { timeout: 10_000 }).toBe("leader");
    const roles = { a: await suite.role(podA), b: await suite.role(podB) };
    await exited;
    return { roles, podA, podB };
  }

  /**
   * The accepted label patches once both a's demotion and b's label are among them: the recording
   * proxy sets a request's status when the API server's answer reaches it, so the pod can show b's
   * label while its patch still shows status 0. Waited for, not read once.
   */
  async function shownOnceAnswered(podA: string, podB: string) {
    const shown = () => labelEvents(suite.kube.requests, new Map());
    await expect
      .poll(
        () => [
          shown().some((s) => s.pod === podA && !s.leader),
          shown().some((s) => s.pod === podB && s.leader),
        ],
        { timeout: 5_000 },
      )
      .toEqual([true, true]);
    return shown();
  }

  it("without peer demotion, a pod being deleted whose demotion is refused once is still demoted before the follower labels itself", async () => {
    const { roles } = await refusedOnce("once", "refused-once", [...LONG, "--no-peer-demotion"]);
    // Never two pods labelled leader: the old leader's demotion came first.
    expect(roles).toEqual({ a: "follower", b: "leader" });
  });

  it("with peer demotion, the old leader's label is off before the new leader's goes on", async () => {
    const { roles, podA, podB } = await refusedOnce("peer", "refused-peer", LONG);
    expect(roles).toEqual({ a: "follower", b: "leader" });
    const shown = await shownOnceAnswered(podA, podB);
    const demoted = shown.findIndex((s) => s.pod === podA && !s.leader);
    const labelled = shown.findIndex((s) => s.pod === podB && s.leader);
    expect(demoted).toBeGreaterThanOrEqual(0);
    expect(demoted).toBeLessThan(labelled);
  });
});
