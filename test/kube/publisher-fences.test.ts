// The higher fence wins the leader label (issue 13's row DELETE): the server ended the old holder's
// term behind its back, a new holder claimed and demoted it once, and the old holder, believing
// until its next renew, put its label back. The new leader demotes an older term's label again
// whenever its peer watch shows one; the old holder does not label itself over a newer term.
import { afterEach, describe, expect, it } from "vitest";
import type { LeadershipState } from "../../src/kube/desired-state.ts";
import { onEachKubeServer } from "../support/kube/kube-server-suites.ts";
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

const OLD = "orders-1";

let h: Harness;
afterEach(async () => {
  await h?.close();
});

function oldTerm(fence: number): LeadershipState {
  return { lease: "orders-sync", role: "leader", fence, holder: `${OLD}-c3d4` };
}

const labelled = async () => [role(await h.pod()), role(await h.pod(OLD))];

await onEachKubeServer("publisher fences suite", (kube) => {
  describe("the higher fence wins the leader label", () => {
    it("demotes a peer labelled leader by an older term after its own demotion pass", async () => {
      h = await startHarness(kube);
      await h.server.seedPod({ metadata: { name: OLD, namespace: NAMESPACE, labels: { ...APP_LABELS } } });
      await h.publisher.start(follower());
      h.publisher.setDesired(leader(8));
      await until("leader on the pod", () => h.publisher.state().published);

      // What the old holder's publisher writes when it puts its label back.
      await h.server.mutatePod(NAMESPACE, OLD, (pod) => {
        if (!pod.metadata) throw new Error("a seeded pod has metadata");
        pod.metadata.labels = { ...pod.metadata.labels, "pglease.io/role": "leader" };
        pod.metadata.annotations = { "pglease.io/lease": "orders-sync", "pglease.io/fence": "7" };
      });
      const again = () => h.logs.find((l) => l.msg === "took a stale leader label off other pods");
      await until("the older term's label taken off again", () => again() !== undefined);
      expect(await labelled()).toEqual(["leader", "follower"]);
      expect((await h.pod(OLD)).metadata?.annotations).toEqual({
        "pglease.io/lease": "orders-sync",
        "pglease.io/superseded-by": "8",
      });
      expect(again()).toMatchObject({
        pods: [OLD],
        fence: 8,
        again: true,
      });
    });

    it("an old holder still believing does not put its label back over the new leader's", async () => {
      h = await startHarness(kube);
      await h.server.seedPod({ metadata: { name: OLD, namespace: NAMESPACE, labels: { ...APP_LABELS } } });
      const old = h.another({ podName: OLD });
      await old.start(follower());
      old.setDesired(oldTerm(7));
      await until("the old holder labelled", async () => role(await h.pod(OLD)) === "leader");

      // The row is deleted; the new holder claims (fence 8) and demotes the old one once.
      await h.publisher.start(follower());
      h.publisher.setDesired(leader(8));
      await until("the old holder saying it leaves the label to the newer term", () =>
        h.logs.some((l) => l.msg.startsWith("a peer is labelled leader by a newer term") && l.pod === POD),
      );
      await until("one leader label, the new holder's", async () => {
        const [mine, theirs] = await labelled();
        return mine === "leader" && theirs === "follower";
      });
      // The old holder learns its term is over.
      old.setDesired({ ...follower(`${POD}-a1b2`) });
      await until("the old holder shows follower", () => old.state().published);
      expect(await labelled()).toEqual(["leader", "follower"]);
    });
  });
});
