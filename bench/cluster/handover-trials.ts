// The disruptions the real-cluster group puts each workload through, the same for pglease (the
// chart) and the client-go labeller: the leader pod deleted (`kubectl delete pod`, the kubelet's
// graceful termination) and `kubectl rollout restart` (the real Deployment controller). Each trial
// watches the workload's pods and its leader Service's EndpointSlices with test/cluster's
// timelines (every event stamped as it arrives) and reads off, from the command until the
// workload is settled again, the time the Service listed no ready pod and the time it listed two.
import { type EndpointTimeline, watchEndpoints } from "../../test/cluster/endpoint-timeline.ts";
import { type PodState, type PodTimeline, watchPods } from "../../test/cluster/pod-timeline.ts";
import type { ClusterSession } from "../../test/cluster/session.ts";

/** A workload whose leader a Service routes to, by the pods' leader label. */
export interface Workload {
  namespace: string;
  /** Its pods' selector. */
  selector: string;
  leaderService: string;
  deployment: string;
  replicas: number;
}

export interface HandoverTrial {
  /** The leader Service without a ready endpoint, from the command until settled. */
  leaderlessMs: number;
  /** The leader Service with two or more ready endpoints (two pods routed to as leader). */
  twoReadyMs: number;
  /** From the command until the Service first listed one ready pod other than the old leader. */
  newLeaderEndpointMs: number;
  /** How many times the Service's one ready endpoint became another pod. */
  leaderChanges: number;
  /** From the command until every pod was Ready again (a rollout: of the new revision) with one leader endpoint. */
  settledMs: number;
}

const SETTLE_TIMEOUT_MS = 180_000;
const HANDOVER_TIMEOUT_MS = 120_000;

const live = (pods: PodState[]) => pods.filter((p) => !p.gone);

/**
 * Waits until the workload has its replicas, every one Ready and none going (and each accepted by
 * `accept`), and the leader Service lists exactly one ready pod; answers that pod's name.
 */
async function settled(
  workload: Workload,
  pods: PodTimeline,
  endpoints: EndpointTimeline,
  accept: (pod: PodState) => boolean = () => true,
): Promise<string> {
  await pods.waitFor((list) => {
    const up = live(list);
    return up.length === workload.replicas && up.every((p) => p.ready && !p.deleting && accept(p));
  }, SETTLE_TIMEOUT_MS);
  const { ready } = await endpoints.waitFor((names) => names.length === 1, SETTLE_TIMEOUT_MS);
  return ready[0] as string;
}

/** Both watches for one trial, stopped however it ends. */
async function observe<T>(
  workload: Workload,
  trial: (pods: PodTimeline, endpoints: EndpointTimeline) => Promise<T>,
): Promise<T> {
  const pods = await watchPods(workload.namespace, workload.selector);
  try {
    const endpoints = await watchEndpoints(workload.namespace, workload.leaderService);
    try {
      return await trial(pods, endpoints);
    } finally {
      endpoints.stop();
    }
  } finally {
    pods.stop();
  }
}

/** The trial's figures off the endpoint timeline, between the command and the settled workload. */
export function trialFigures(
  endpoints: Pick<EndpointTimeline, "changes" | "durationWhere">,
  leader: string,
  fromMs: number,
  toMs: number,
): HandoverTrial {
  let current = leader;
  let leaderChanges = 0;
  let newLeaderAt: number | undefined;
  for (const change of endpoints.changes) {
    if (change.atMs < fromMs || change.ready.length !== 1 || change.ready[0] === current) continue;
    current = change.ready[0] as string;
    leaderChanges++;
    newLeaderAt ??= change.atMs;
  }
  return {
    leaderlessMs: Math.round(endpoints.durationWhere((ready) => ready.length === 0, fromMs, toMs)),
    twoReadyMs: Math.round(endpoints.durationWhere((ready) => ready.length >= 2, fromMs, toMs)),
    newLeaderEndpointMs: Math.round((newLeaderAt ?? toMs) - fromMs),
    leaderChanges,
    settledMs: Math.round(toMs - fromMs),
  };
}

/** `kubectl delete pod LEADER` (graceful, the pod's grace period), until its replacement is Ready. */
export function deleteLeaderTrial(session: ClusterSession, workload: Workload): Promise<HandoverTrial> {
  return observe(workload, async (pods, endpoints) => {
    const leader = await settled(workload, pods, endpoints);
    const startedAt = performance.now();
    await session.kubectl(["delete", "pod", leader, "-n", workload.namespace, "--wait=false"]);
    await endpoints.waitFor((ready) => ready.length === 1 && ready[0] !== leader, HANDOVER_TIMEOUT_MS);
    await settled(workload, pods, endpoints);
    return trialFigures(endpoints, leader, startedAt, performance.now());
  });
}

/** `kubectl rollout restart` of the workload's Deployment, until every pod is of the new revision. */
export function rolloutTrial(session: ClusterSession, workload: Workload): Promise<HandoverTrial> {
  return observe(workload, async (pods, endpoints) => {
    const leader = await settled(workload, pods, endpoints);
    const oldRevisions = new Set(live(pods.current()).map((p) => p.revision));
    const deployment = [`deployment/${workload.deployment}`, "-n", workload.namespace];
    const startedAt = performance.now();
    await session.kubectl(["rollout", "restart", ...deployment]);
    await session.kubectl(["rollout", "status", ...deployment, "--timeout=300s"]);
    await settled(workload, pods, endpoints, (p) => !oldRevisions.has(p.revision));
    return trialFigures(endpoints, leader, startedAt, performance.now());
  });
}
