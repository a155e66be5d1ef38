// Review (issue 28, "a previous incarnation's pod of the same name"): a StatefulSet pod that is
// force-deleted (`kubectl delete pod --force --grace-period=0`, the usual step for a pod on a
// NotReady node) is gone from the API at once while its containers may still run, and the
// StatefulSet controller creates the next incarnation under the same name. The old process's
// own-pod watch is by name: it takes the new pod (another uid) for its own and patches it. While
// the old process still leads, it labels the NEW incarnation leader: a pod whose application
// does not lead gets the leader Service's traffic. A patch pinned to the uid it first saw (a
// merge patch carrying metadata.uid is refused with 409 on another uid) would leave it alone.
import { expect, it } from "vitest";
import { seedWorkloadPod } from "../support/kube/kubelet.ts";
import { onEachSidecarKubeServer } from "../support/kube/sidecar-kube-suite.ts";

const NS = "incarnation";
const LABELS = { "app.kubernetes.io/name": "orders", "app.kubernetes.io/instance": "prod" };

await onEachSidecarKubeServer(
  "a force-deleted pod's process after its successor pod appears",
  NS,
  (suite) => {
    it("never labels the next incarnation of its pod (same name, another uid)", async () => {
      const lease = "incarnation";
      await seedWorkloadPod(suite.kube, NS, "orders-0", LABELS, true);
      const old = (await suite.sidecar("orders-0", lease, ["--duration", "10s"])).run;
      await old.waitForLog(new RegExp(`^acquired lease ${lease} with fence \\d+$`));
      await expect.poll(() => suite.role("orders-0"), { timeout: 10_000 }).toBe("leader");
      const firstUid = (await suite.kube.pod(NS, "orders-0"))?.metadata?.uid;

      await suite.kube.deletePod(NS, "orders-0", 0); // force: gone from the API, the process runs on
      suite.kube.clearRequests(); // from here on, every patch of orders-0 is one of the new pod
      await seedWorkloadPod(suite.kube, NS, "orders-0", LABELS, true); // the StatefulSet's next one
      const next = await suite.kube.pod(NS, "orders-0");
      expect(next?.metadata?.uid).not.toBe(firstUid);
      expect(next?.metadata?.labels?.["pglease.io/role"]).toBeUndefined();

      // The new incarnation's sidecar starts: it publishes follower and sees the old process lead.
      const successor = (await suite.sidecar("orders-0", lease, ["--duration", "10s"])).run;
      await successor.waitForLog(new RegExp(`^lease ${lease} is held by`));
      await expect.poll(() => suite.role("orders-0"), { timeout: 10_000 }).toBe("follower");
      // The old process is still the leader; its pod is gone. Nothing may label the new one leader.
      await old.waitForLog(/^pod orders-0 \(uid [^)]+\) was deleted: this process publishes nothing more/);
      const labelledLeader = () =>
        suite.kube.requests.filter(
          (r) =>
            r.method === "PATCH" &&
            r.status === 200 &&
            /\/pods\/orders-0$/.test(r.path) &&
            JSON.stringify(r.body ?? null).includes('"pglease.io/role":"leader"') &&
            r.at > (next?.metadata?.creationTimestamp?.getTime() ?? 0) - 1_000,
        ).length;
      const uidNow = async () => (await suite.kube.pod(NS, "orders-0"))?.metadata?.uid;
      expect(await uidNow()).toBe(next?.metadata?.uid);
      expect({ leaderPatchesOnTheNewPod: labelledLeader(), role: await suite.role("orders-0") }).toEqual({
        leaderPatchesOnTheNewPod: 0,
        role: "follower",
      });
    });
  },
);
