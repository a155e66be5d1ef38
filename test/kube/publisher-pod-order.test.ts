// The versions of its own pod the publisher hands on (the health gate reads the application's
// readiness from them) never go back in time. A patch's answer is the pod as of that patch; when
// the kubelet writes the pod while the answer is on its way, the watch brings the newer version
// first. Found in CI: a leader's application turned unready, the gate saw it, and 4 ms later the
// answer to the leader's own label patch, older, said ready again; the leader never handed over.
import type { V1Pod } from "@kubernetes/client-node";
import { afterEach, expect, it } from "vitest";
import { onEachKubeServer } from "../support/kube/kube-server-suites.ts";
import { follower, type Harness, leader, NAMESPACE, POD, startHarness, until } from "./publisher-harness.ts";

let h: Harness;
afterEach(async () => {
  await h?.close();
});

const mark = (pod: V1Pod | { metadata?: { annotations?: Record<string, string> } }) =>
  pod.metadata?.annotations?.["example.com/kubelet-wrote"];

await onEachKubeServer("publisher: its own pod's versions in order", (kube) => {
  it("does not hand on a patch's answer older than a version its watch already brought", async () => {
    const handed: V1Pod[] = [];
    h = await startHarness(kube, { onPod: (pod) => handed.push(pod as V1Pod) });
    await h.publisher.start(follower());
    await h.server.waitForWatches(2);

    // The label patch commits; its answer waits.
    const held = h.server.faults.hang({ match: { method: "PATCH" }, phase: "after" });
    h.publisher.setDesired(leader(7));
    await held.waitForHeld(1);
    // Another writer (the kubelet) changes the pod after the patch: the watch brings that first.
    // Its replace on a stale version is refused (409) when another of the publisher's patches
    // commits in between; like the kubelet, it reads again and retries.
    for (let attempt = 1; ; attempt++) {
      try {
        await h.server.mutatePod(NAMESPACE, POD, (pod) => {
          pod.metadata = {
            ...pod.metadata,
            annotations: { ...pod.metadata?.annotations, "example.com/kubelet-wrote": "yes" },
          };
        });
        break;
      } catch (error) {
        if (attempt >= 5 || !String(error).includes("409")) throw error;
      }
    }
    await until("the kubelet's version handed on", () => handed.some((p) => mark(p) === "yes"));
    const count = handed.length;
    held.release();
    await until("leader published", () => h.publisher.state().published);

    const after = handed.slice(count);
    expect(after.every((p) => mark(p) === "yes")).toBe(true);
    const versions = handed.map((p) => BigInt(p.metadata?.resourceVersion ?? "0"));
    expect(versions).toEqual([...versions].sort((a, b) => (a < b ? -1 : a > b ? 1 : 0)));
  });
});
