// Review (issue 28, "a previous incarnation's pod of the same name"): a StatefulSet pod that is
// force-deleted (`kubectl delete pod --force --grace-period=0`, the usual step for a pod on a
// NotReady node) is gone from the API at once while its containers may still run, and the
// StatefulSet controller creates the next incarnation under the same name. The old process's
// own-pod watch is by name: it must never take the new pod (another uid) for its own and label it
// leader for a term the new pod's application does not hold (patches are pinned to the uid).
//
// Since the deletion handover (issue 30) the old process, when its watch is up, also sees the force
// delete itself: the real registry writes a DELETE with grace period 0 as an update marking the pod
// (deletionTimestamp, deletionGracePeriodSeconds 0; a MODIFIED event) and then the removal (DELETED),
// so the old process hands over and releases before the next incarnation exists. The new pod's own
// sidecar then claims the free lease and labels its pod leader: that is its own term, correct (the
// old pod is out of every Service). What may never happen is a leader label on the new pod naming
// the OLD process. The case where the old process misses the mark (partitioned, still leading) is
// test/kube/publisher-incarnation.test.ts: every patch pinned to the uid it first saw.
import { expect, it } from "vitest";
import { seedWorkloadPod } from "../support/kube/kubelet.ts";
import { onEachSidecarKubeServer } from "../support/kube/sidecar-kube-suite.ts";

const NS = "incarnation";
const LABELS = { "app.kubernetes.io/name": "orders", "app.kubernetes.io/instance": "prod" };

await onEachSidecarKubeServer(
  "a force-deleted pod's process after its successor pod appears",
  NS,
  (suite) => {
    it("hands over at the force delete; the next incarnation (same name, another uid) is labelled only by its own sidecar", async () => {
      const lease = "incarnation";
      await seedWorkloadPod(suite.kube, NS, "orders-0", LABELS, true);
      const old = (await suite.sidecar("orders-0", lease, ["--duration", "10s"])).run;
      const oldHolder = String(
        (await old.waitForLog(new RegExp(`^acquired lease ${lease} with fence \\d+$`))).holder,
      );
      await expect.poll(() => suite.role("orders-0"), { timeout: 10_000 }).toBe("leader");
      const firstUid = (await suite.kube.pod(NS, "orders-0"))?.metadata?.uid;

      await suite.kube.deletePod(NS, "orders-0", 0); // force: gone from the API, the process runs on
      // Its watch showed the pod marked for deletion (before the DELETED): it hands over, releases,
      // and publishes nothing more; all of this before the next incarnation exists.
      await old.waitForLog(/^pod orders-0 is being deleted: handing over now/);
      const released = await old.waitForLog(new RegExp(`^released lease ${lease} \\(fence \\d+\\)$`));
      await old.waitForLog(/^pod orders-0 \(uid [^)]+\) was deleted: this process publishes nothing more/);
      suite.kube.clearRequests(); // from here on, every patch of orders-0 is one of the new pod
      await seedWorkloadPod(suite.kube, NS, "orders-0", LABELS, true); // the StatefulSet's next one
      const next = await suite.kube.pod(NS, "orders-0");
      expect(next?.metadata?.uid).not.toBe(firstUid);
      expect(next?.metadata?.labels?.["pglease.io/role"]).toBeUndefined();

      // The new incarnation's sidecar claims the lease the old process released: a plain claim of a
      // free lease (not a restart takeover of a live term), in a term above the old one.
      const successor = (await suite.sidecar("orders-0", lease, ["--duration", "10s"])).run;
      const acquired = await successor.waitForLog(new RegExp(`^acquired lease ${lease} with fence \\d+$`));
      expect({ reason: acquired.reason, previous: acquired.previous_holder }).toEqual({
        reason: "claim",
        previous: oldHolder,
      });
      expect(Number(acquired.fence)).toBeGreaterThan(Number(released.fence));
      await expect.poll(() => suite.role("orders-0"), { timeout: 10_000 }).toBe("leader");
      const pod = await suite.kube.pod(NS, "orders-0");
      expect({
        uid: pod?.metadata?.uid,
        holder: pod?.metadata?.annotations?.["pglease.io/holder"],
        fence: pod?.metadata?.annotations?.["pglease.io/fence"],
      }).toEqual({ uid: next?.metadata?.uid, holder: acquired.holder, fence: String(acquired.fence) });
      // Every accepted leader label on the new pod is the successor's own, none the old process's.
      // The recording proxy sets a request's status when the API server's answer reaches it, so the
      // pod can show the label while its patch still shows status 0: waited for, not read once.
      const leaderLabellers = () =>
        suite.kube.requests
          .filter((r) => r.method === "PATCH" && r.status === 200 && /\/pods\/orders-0$/.test(r.path))
          .map((r) => leaderPatchHolder(r.body))
          .filter((holder) => holder !== null);
      await expect.poll(() => leaderLabellers().length, { timeout: 5_000 }).toBeGreaterThan(0);
      expect(new Set(leaderLabellers())).toEqual(new Set([acquired.holder]));
    });
  },
);

/**
 * The holder a patch labelling the pod leader names ("none" without one), null for any other patch:
 * a leader's own label goes out as a guarded JSON patch (ops), the rest as merge patches.
 */
function leaderPatchHolder(body: unknown): string | null {
  const ROLE = "pglease.io/role";
  const HOLDER = "pglease.io/holder";
  if (Array.isArray(body)) {
    const value = (path: string) =>
      (body as { op: string; path: string; value?: unknown }[]).find(
        (op) => op.op !== "test" && op.path === path,
      )?.value;
    if (value(`/metadata/labels/${ROLE.replace("/", "~1")}`) !== "leader") return null;
    return String(value(`/metadata/annotations/${HOLDER.replace("/", "~1")}`) ?? "none");
  }
  const metadata = (
    body as { metadata?: { labels?: Record<string, unknown>; annotations?: Record<string, unknown> } }
  )?.metadata;
  if (metadata?.labels?.[ROLE] !== "leader") return null;
  return String(metadata.annotations?.[HOLDER] ?? "none");
}
