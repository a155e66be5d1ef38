// A fence sequence that went back (a new database or lease table, a restore from backup, an
// asynchronous failover that lost sequence values: docs/guarantees.md) leaves this pod's
// superseded-by annotation above every fence the sequence now hands out. The annotation only goes
// up, and a leader never labels its pod while it is at or above its own fence: without a way to
// prove the annotation stale, the pod is never labelled leader again and the leader Service stays
// empty. A renew of the term after the annotation was read proves it stale (reconcile.ts,
// staleFenceProven); a term whose renew count does not move after the read never labels itself.
import { afterEach, describe, expect, it } from "vitest";
import { POD_CONTRACT } from "../../src/shared/pod-contract.ts";
import { onEachKubeServer } from "../support/kube/kube-server-suites.ts";
import { holdNextPatch, labelTimeline, PEER, peerLeader } from "./label-timeline.ts";
import {
  APP_LABELS,
  follower,
  type Harness,
  leader,
  NAMESPACE,
  POD,
  role,
  startHarness,
  until,
} from "./publisher-harness.ts";

let h: Harness;
const stops: Array<() => void> = [];
afterEach(async () => {
  for (const stop of stops.splice(0)) stop();
  await h?.close();
});

const REWOUND_FROM = "1000000";
const superseded = async () => (await h.pod()).metadata?.annotations?.[POD_CONTRACT.supersededAnnotation];

/** At least 20 passes refused the label: the failure log repeats the same refusal every 20th. */
async function refusedPasses(): Promise<void> {
  const refusals = () =>
    h.logs.filter((l) => String(l.msg).includes("unless a renew of this term proves it stale"));
  await until("20 refused passes", () => refusals().length >= 2, 5_000);
}

await onEachKubeServer("publisher rewound fence suite", (kube) => {
  describe("a superseded-by annotation from before the fence sequence went back", () => {
    it("is replaced and the pod labelled leader after one renew of the term that read it", async () => {
      // The elector's word: term 5 leads throughout; `renewals` counts its accepted claim and renews.
      let renewals = 1;
      h = await startHarness(kube, {
        stillLeads: (t) => t.fence === 5,
        renewals: (t) => (t.fence === 5 ? renewals : null),
      });
      await h.server.mutatePod(NAMESPACE, POD, (pod) => {
        pod.metadata = {
          ...pod.metadata,
          annotations: { [POD_CONTRACT.supersededAnnotation]: REWOUND_FROM },
        };
      });
      await h.publisher.start(follower());
      h.publisher.setDesired(leader(5));
      // No renew since the read: the annotation could be a newer term's, so no label, pass after pass.
      await refusedPasses();
      expect(role(await h.pod())).toBe("follower");
      expect(await superseded()).toBe(REWOUND_FROM);
      // One renew of term 5 after the read: the bound is the publisher's backoff (80 ms here) plus
      // one patch; 3 s leaves room for a loaded host.
      renewals++;
      await until("leader on the pod", async () => role(await h.pod()) === "leader", 3_000);
      expect(await superseded()).toBe("4");
    });

    it("stays refused while no renew of the term follows the read", async () => {
      h = await startHarness(kube, { stillLeads: () => true, renewals: () => 7 });
      await h.server.mutatePod(NAMESPACE, POD, (pod) => {
        pod.metadata = { ...pod.metadata, annotations: { [POD_CONTRACT.supersededAnnotation]: "9" } };
      });
      await h.publisher.start(follower());
      h.publisher.setDesired(leader(5));
      await refusedPasses();
      expect(role(await h.pod())).toBe("follower");
      expect(await superseded()).toBe("9");
    });
  });

  // The replacement label of a stale annotation tests the stale value. A later term's leader that
  // saw that value (above its own fence) and wrote nothing would leave the test passing: the held
  // replacement, landing after it labelled itself, labelled a second pod.
  describe.each([
    ["with the peer watches", false],
    ["with the peer watches refused", true],
  ])("a later term's leader, %s", (_, watchesRefused) => {
    it("fences off a pod whose superseded-by is stale, so that pod's replacement label held at the server is refused", async () => {
      const live = new Set<number>([5]);
      let renewals = 1;
      h = await startHarness(kube, {
        stillLeads: (t) => t.fence !== null && live.has(t.fence),
        renewals: (t) => (t.fence === 5 ? renewals : null),
      });
      if (watchesRefused)
        h.server.faults.failNext({
          match: (r) => r.watch && r.query.get("labelSelector") !== null,
          status: 500,
          count: 1_000,
        });
      await h.server.mutatePod(NAMESPACE, POD, (pod) => {
        pod.metadata = {
          ...pod.metadata,
          annotations: { [POD_CONTRACT.supersededAnnotation]: REWOUND_FROM },
        };
      });
      await h.server.seedPod({ metadata: { name: PEER, namespace: NAMESPACE, labels: { ...APP_LABELS } } });
      const peer = h.another({ podName: PEER });
      await h.publisher.start(follower());
      expect((await peer.start(follower())).published).toBe(true);
      const labelled = await labelTimeline(h.server);
      stops.push(labelled.close);
      await until("both pods seen", () => labelled.seen(POD) && labelled.seen(PEER));
      // Term 5 waits for a renew to prove the annotation stale; the renew comes, and its
      // replacement label (testing the stale value) waits at the server.
      h.publisher.setDesired(leader(5));
      await until("awaiting a renew", () =>
        h.logs.some((l) => String(l.msg).startsWith("a newer term fenced this pod off")),
      );
      const held = holdNextPatch(h.server, POD);
      renewals++;
      await held.waitForHeld(1);
      // Term 5 ends; the peer wins term 6 and labels itself.
      live.delete(5);
      live.add(6);
      peer.setDesired(peerLeader(6));
      await until("the peer labelled leader", async () => role(await h.pod(PEER)) === "leader");
      expect((await h.pod(POD)).metadata?.annotations?.[POD_CONTRACT.supersededAnnotation]).toBe("6");
      held.release();
      await until(
        "the held replacement answered",
        () => h.patches.filter((p) => p.target === "metadata").length >= 2,
      );
      const replacement = h.patches.filter((p) => p.target === "metadata")[1];
      expect(replacement?.ok).toBe(false);
      expect(role(await h.pod(POD))).not.toBe("leader");
      expect(labelled.overlaps).toEqual([]);
      expect(labelled.overlapping()).toBe(false);
    });
  });
});
