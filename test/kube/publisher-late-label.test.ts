// A late self-label: an old term's leader label that reaches the API server after a newer term's
// demotion pass (its process paused between the check "still leads" and the patch, or the patch
// held at the server longer than a handover takes). The server holds the old leader's patch; a
// watch of the namespace sees every write in the server's order, so the test knows exactly whether
// two pods were ever labelled leader at once, and for how long its watch saw it.
import { afterEach, expect, it } from "vitest";
import type { PodPublisher } from "../../src/kube/publisher-contract.ts";
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

/**
 * This pod leads term 1 and its label patch waits at the server; meanwhile term 1 ends, the peer
 * wins term 2 and labels itself; then the held patch goes on. Returns what the watch saw.
 */
async function lateSelfLabel(
  kube: Parameters<typeof startHarness>[0],
  peerWatches: "healthy" | "refused",
  /** Whether this process learns that term 1 ended; false: it still believes (paused, suspended). */
  oldTermEnds: boolean,
) {
  // The elector's word: the terms this test says are current.
  const live = new Set<number>();
  h = await startHarness(kube, { stillLeads: (t) => t.fence !== null && live.has(t.fence) });
  if (peerWatches === "refused") {
    // Every watch of the peers refused: the new leader lists them once per term instead.
    h.server.faults.failNext({
      match: (r) => r.watch && r.query.get("labelSelector") !== null,
      status: 500,
      count: 1_000,
    });
  }
  await h.server.seedPod({ metadata: { name: PEER, namespace: NAMESPACE, labels: { ...APP_LABELS } } });
  const b: PodPublisher = h.another({ podName: PEER });
  expect((await h.publisher.start(follower())).published).toBe(true);
  expect((await b.start(follower())).published).toBe(true);
  const timeline = await labelTimeline(h.server);
  stops.push(timeline.close);
  await until("the watch sees both pods", () => timeline.seen(POD) && timeline.seen(PEER));

  // Term 1 (this pod): its publisher checks that it still leads and sends its label, which waits
  // at the server as a paused process's or a slow server's would.
  const held = holdNextPatch(h.server, POD);
  const metadataPatches = () => h.patches.filter((p) => p.target === "metadata").length;
  const before = metadataPatches();
  live.add(1);
  h.publisher.setDesired(leader(1));
  await held.waitForHeld(1);

  // Term 1 ends on the server; the peer wins term 2, runs its demotion pass and labels itself.
  if (oldTermEnds) live.delete(1);
  live.add(2);
  b.setDesired(peerLeader(2));
  await until("the peer labelled leader", async () => role(await h.pod(PEER)) === "leader");

  // Now the old term's label reaches the pod.
  held.release();
  await until("the held label patch answered", () => metadataPatches() > before);
  return timeline;
}

await onEachKubeServer("a late self-label", (kube) => {
  it("an old term's self-label held at the API server past a handover is refused: never two pods labelled leader", async () => {
    const timeline = await lateSelfLabel(kube, "healthy", true);
    await until("this pod not labelled leader", async () => role(await h.pod(POD)) !== "leader");
    // The peer's watch-driven repair, if any, has had its chance: what the watch saw is final.
    await until("no overlap in progress", () => !timeline.overlapping());
    expect(timeline.overlaps, "ms during which two pods were labelled leader").toEqual([]);
    expect(role(await h.pod(PEER))).toBe("leader");
    // Refused by the API server (its test of superseded-by failed), then not sent again.
    expect(h.patches.filter((p) => p.target === "metadata" && !p.ok).map((p) => p.status)).toEqual([422]);
    expect((await h.pod(POD)).metadata?.annotations?.["pglease.io/superseded-by"]).toBe("2");
  });

  it("refused also when the new leader cannot watch its peers (nothing would repair the label)", async () => {
    const timeline = await lateSelfLabel(kube, "refused", false);
    // Nothing but this process's own elector would take the label off again (its next renew).
    expect(role(await h.pod(POD))).not.toBe("leader");
    // Its process still believes it leads: its pod, read again, says a newer term fenced it off.
    await until("this pod's publisher saw why", () =>
      h.logs.some((l) => l.msg.startsWith("a newer term fenced this pod off") && l.supersededBy === 2),
    );
    expect(role(await h.pod(POD))).not.toBe("leader");
    expect(timeline.overlapping()).toBe(false);
    expect(timeline.overlaps).toEqual([]);
    expect(role(await h.pod(PEER))).toBe("leader");
  });

  it("an old term's label that lands before the new leader's fencing write makes that write fail: the new leader demotes it first", async () => {
    const live = new Set<number>([1, 2]);
    h = await startHarness(kube, { stillLeads: (t) => t.fence !== null && live.has(t.fence) });
    await h.server.seedPod({ metadata: { name: PEER, namespace: NAMESPACE, labels: { ...APP_LABELS } } });
    const b: PodPublisher = h.another({ podName: PEER });
    expect((await h.publisher.start(follower())).published).toBe(true);
    expect((await b.start(follower())).published).toBe(true);
    const timeline = await labelTimeline(h.server);
    stops.push(timeline.close);
    await until("the watch sees both pods", () => timeline.seen(POD) && timeline.seen(PEER));

    // The peer (term 2) saw this pod unlabelled; its fencing write of this pod waits at the server.
    const held = holdNextPatch(h.server, POD);
    b.setDesired(peerLeader(2));
    await held.waitForHeld(1);
    // Meanwhile this pod's term 1 (still leading by its own clock) labels it.
    h.publisher.setDesired(leader(1));
    await until("this pod labelled leader", async () => role(await h.pod(POD)) === "leader");
    live.delete(1);
    held.release();

    await until("the peer labelled leader", async () => role(await h.pod(PEER)) === "leader");
    await until("no overlap in progress", () => !timeline.overlapping());
    expect(timeline.overlaps, "ms during which two pods were labelled leader").toEqual([]);
    expect(role(await h.pod(POD))).toBe("follower");
    expect((await h.pod(POD)).metadata?.annotations?.["pglease.io/superseded-by"]).toBe("2");
  });
});
