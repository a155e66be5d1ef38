// One failover trial of a lane: its leader stopped (SIGKILL or SIGTERM) at a random phase of its
// renew cycle, the handover timed on the servers' clocks, the stopped pod's process restarted.
import { setTimeout as delay } from "node:timers/promises";
import type { FailoverTimer } from "../../test/support/processes/demo-helpers.ts";
import type { Lane } from "./lane.ts";
import { leaseNamesNewHolder, podLabelled, podLabelledLeader } from "./request-log.ts";
import { pgleaseRenewMs } from "./systems.ts";
import { until } from "./wait.ts";

// The dead leader's last expiry: its term (key and fence) can no longer be renewed by anyone.
const TERM_EXPIRY =
  "SELECT expires_at::text AS expires_at FROM public.pglease_leases WHERE key = $1 AND fence = $2";

export interface TrialResult {
  lane: string;
  /** Stop signal sent → a new leader holds the lease (pglease: acquired_at; client-go: its acquired; advisory: the lock's take). */
  holdsMs: number;
  /** → the new leader's pod labelled (pglease) / the Lease object names it (client-go); null for the advisory lock. */
  publishedMs: number | null;
  /** pglease after a crash: the dead leader's server-side expiry → the new claim. */
  expiryToClaimMs: number | null;
  /** pglease after SIGTERM: stop signal → the stopping pod's demotion (its follower label patch) arrives at the API server. */
  demotedMs: number | null;
  /** → the API server answered that patch (written to its store). */
  demotedAnsweredMs: number | null;
}

interface Start {
  server: { text: string; ms: number } | null;
  wallAt: number;
  /** How many requests each cluster's API server had logged when the leader was stopped. */
  marks: number[];
  oldFence: number;
  oldIdentity: string | null;
  /** The stopped leader's pod. */
  oldPod: string;
  crash: boolean;
}

/** Stops the leader with `signal` at a random phase of its renew cycle, times the handover, restarts it. */
export async function failoverTrial(lane: Lane, signal: "SIGKILL" | "SIGTERM"): Promise<TrialResult> {
  const leader = await lane.settle();
  // A uniformly random moment within the renew cycle: a crash right after a renewal waits longest.
  await delay(Math.random() * pgleaseRenewMs(lane.timing), undefined, { signal: lane.signal });
  const oldFence = lane.timer ? ((await lane.timer.read())?.fence ?? 0) : 0;
  const server = lane.admin ? await lane.serverClock() : null;
  const wallAt = Date.now();
  const marks = lane.kubes.map((k) => k.requests.length);
  const oldIdentity = leader.identity;
  await leader.kill(signal);
  const start: Start = {
    server,
    wallAt,
    marks,
    oldFence,
    oldIdentity,
    oldPod: leader.pod,
    crash: signal === "SIGKILL",
  };
  try {
    if (lane.system.kind === "advisory-lock") return await measureAdvisory(lane, start);
    if (lane.system.kind === "client-go") return await measureClientGo(lane, start);
    return await measurePglease(lane, start);
  } finally {
    // The pod's container is restarted, as the kubelet would: a new process, a new identity.
    lane.restart(leader);
  }
}

async function measureAdvisory(lane: Lane, start: Start): Promise<TrialResult> {
  const taken = await lane.firstAcquired(start.wallAt, () => true);
  return {
    lane: lane.name,
    holdsMs: Number(taken.fields.serverAtMs) - (start.server?.ms ?? 0),
    publishedMs: null,
    expiryToClaimMs: null,
    demotedMs: null,
    demotedAnsweredMs: null,
  };
}

async function measureClientGo(lane: Lane, start: Start): Promise<TrialResult> {
  const taken = await lane.firstAcquired(start.wallAt, (c) => c.identity !== start.oldIdentity);
  const contenders = lane.candidates
    .map((c) => c.identity)
    .filter((id): id is string => id !== null && id !== start.oldIdentity);
  const shown = await until(
    `${lane.name}: the Lease never named a new holder`,
    lane.timeoutMs,
    lane.signal,
    () => lane.kube?.requests.slice(start.marks[0]).find(leaseNamesNewHolder(contenders)),
  );
  return {
    lane: lane.name,
    holdsMs: Number(taken.fields.at) - start.wallAt,
    publishedMs: shown.at - start.wallAt,
    expiryToClaimMs: null,
    demotedMs: null,
    demotedAnsweredMs: null,
  };
}

async function measurePglease(lane: Lane, start: Start): Promise<TrialResult> {
  const timer = lane.timer as FailoverTimer;
  const expiry = start.crash
    ? (await lane.admin?.query<{ expires_at: string }>(TERM_EXPIRY, [lane.lease, start.oldFence]))?.rows[0]
        ?.expires_at
    : undefined;
  const term = await timer.waitForNewTerm(
    start.oldFence,
    start.server?.text ?? "",
    lane.timeoutMs,
    lane.signal,
  );
  const fromExpiry = expiry === undefined ? null : ((await timer.read(expiry))?.acquiredAfterMs ?? null);
  const pod = lane.candidates.find((c) => c.identity === term.holder)?.pod;
  // Its own cluster's API server: a leader publishes nowhere else.
  const cluster = pod === undefined ? 0 : lane.clusterOf(pod);
  const labelled = await until(
    `${lane.name}: the new leader's pod was never labelled`,
    lane.timeoutMs,
    lane.signal,
    () => lane.kubes[cluster]?.requests.slice(start.marks[cluster]).find(podLabelledLeader(pod)),
  );
  // The stopping pod's demotion, sent beside its release (or the new leader's, whichever lands first).
  const oldCluster = lane.clusterOf(start.oldPod);
  const demoted = start.crash
    ? undefined
    : lane.kubes[oldCluster]?.requests
        .slice(start.marks[oldCluster])
        .find(podLabelled(start.oldPod, "follower"));
  return {
    lane: lane.name,
    holdsMs: term.failoverMs,
    publishedMs: labelled.at - start.wallAt,
    expiryToClaimMs: fromExpiry,
    demotedMs: demoted ? demoted.at - start.wallAt : null,
    demotedAnsweredMs: demoted?.answeredAt ? demoted.answeredAt - start.wallAt : null,
  };
}
