// The application in the leader's pod turns unready (the kubelet's report of its container): the
// trial times the handover to a pod whose application is ready, against the health gate's grace
// period, which is the wait the operator chose. client-go has no health input: its leader keeps
// the Lease until its process dies, so it has no row to measure.
import { setTimeout as delay } from "node:timers/promises";
import type { Lane } from "./lane.ts";
import { podLabelledLeader } from "./request-log.ts";
import { healthGraceMs, pgleaseRenewMs } from "./systems.ts";

export interface HealthTrialResult {
  lane: string;
  /** Application unready → a new term on PostgreSQL's clock. */
  holdsMs: number;
  /** Application unready → the new leader's pod labelled leader. */
  labelledMs: number;
  /** labelledMs − the grace period: what pglease adds to the wait the operator chose. */
  overGraceMs: number;
}

export async function healthTrial(lane: Lane): Promise<HealthTrialResult> {
  const { kube, timer } = lane;
  if (!kube || !timer) throw new Error(`${lane.name}: the health trial needs pglease on an API server`);
  const leader = await lane.settle();
  await delay(Math.random() * pgleaseRenewMs(lane.timing), undefined, { signal: lane.signal });
  const oldFence = (await timer.read())?.fence ?? 0;
  const server = await lane.serverClock();
  const mark = kube.requests.length;
  const wallAt = Date.now();
  await kube.setAppReady(leader.pod, false);
  try {
    const term = await timer.waitForNewTerm(oldFence, server.text, lane.timeoutMs, lane.signal);
    const pod = lane.candidates.find((c) => c.identity === term.holder)?.pod;
    const labelled = await lane.waitForRequest(
      mark,
      podLabelledLeader(pod),
      "the new leader's pod was never labelled",
    );
    const labelledMs = labelled.at - wallAt;
    return {
      lane: lane.name,
      holdsMs: term.failoverMs,
      labelledMs,
      overGraceMs: labelledMs - healthGraceMs(lane.timing),
    };
  } finally {
    // Ready again: after the settle period it campaigns like the others.
    await kube.setAppReady(leader.pod, true);
  }
}
