// What the pod should show, as a pure function of the elector's state, and the smallest
// patches that take a pod as last seen to it. No I/O here: the publisher decides when to send.
import { holderCluster } from "../election/identity.ts";
import {
  CONDITION_REASON,
  fenceAnnotationValue,
  POD_CONTRACT,
  ROLE,
  type Role,
} from "../shared/pod-contract.ts";
import type { Pod, PodCondition } from "./client/api-types.ts";
import type { PublishConfig } from "./publish-config.ts";

export interface LeadershipState {
  lease: string;
  role: Role;
  /** The fencing token of this pod's term; null when it holds none. */
  fence: number | null;
  /** Who holds the lease as far as this pod knows; "" when unknown. */
  holder: string;
  /** Why this pod stops leading, when it is not a plain loss (a health handover): the Event says it. */
  why?: string;
  /** Why this pod does not campaign now (its health gate); null or absent while it does. */
  notCampaigning?: string | null;
}

export interface DesiredCondition {
  type: string;
  status: "True" | "False";
  reason: (typeof CONDITION_REASON)[keyof typeof CONDITION_REASON];
  message: string;
}

export interface DesiredPod {
  labels: Record<string, string>;
  /** null: the annotation must be absent (a JSON merge patch deletes a key set to null). */
  annotations: Record<string, string | null>;
  condition: DesiredCondition;
}

export function desiredPod(state: LeadershipState, config: PublishConfig): DesiredPod {
  const leader = state.role === ROLE.leader;
  return {
    labels: { [config.roleLabel]: leader ? config.leaderValue : config.followerValue },
    annotations: {
      [config.fenceAnnotation]: fenceAnnotationValue(state.fence),
      [config.holderAnnotation]: state.holder === "" ? null : state.holder,
      [config.leaseAnnotation]: state.lease,
      [POD_CONTRACT.notCampaigningAnnotation]: state.notCampaigning ?? null,
      // Only where clusters share the lease: a single-cluster pod keeps its annotations as they were.
      ...(config.clusterName === null ? {} : { [config.leaderClusterAnnotation]: leaderCluster(state) }),
    },
    condition: {
      type: config.conditionType,
      status: leader ? "True" : "False",
      reason: leader ? CONDITION_REASON.held : CONDITION_REASON.notHeld,
      message: leader
        ? `holds lease ${state.lease}${state.fence === null ? "" : ` with fence ${state.fence}`}`
        : `does not hold lease ${state.lease}`,
    },
  };
}

/** The cluster that leads as this pod knows it: the holder's, or null (annotation removed) when unknown. */
function leaderCluster(state: LeadershipState): string | null {
  return state.holder === "" ? null : holderCluster(state.holder);
}

/**
 * True when this follower knows the lease is held by a pod of another cluster: no pod of its own
 * cluster may keep a leader label then, and the new leader cannot reach this cluster to clear it.
 */
export function heldInAnotherCluster(state: LeadershipState, config: PublishConfig): boolean {
  if (state.role !== ROLE.follower || config.clusterName === null) return false;
  const cluster = leaderCluster(state);
  return cluster !== null && cluster !== config.clusterName;
}

export interface MetadataPatch {
  metadata: { labels?: Record<string, string>; annotations?: Record<string, string | null> };
}

/** The JSON merge patch of labels and annotations still missing from the pod, or null. */
export function metadataPatch(desired: DesiredPod, pod: Pod | undefined): MetadataPatch | null {
  const labels = differences(desired.labels, pod?.metadata?.labels);
  const annotations = differences(desired.annotations, pod?.metadata?.annotations);
  if (labels === null && annotations === null) return null;
  return {
    metadata: { ...(labels === null ? {} : { labels }), ...(annotations === null ? {} : { annotations }) },
  } as MetadataPatch;
}

function differences<V extends string | null>(
  wanted: Record<string, V>,
  actual: Record<string, string> | undefined,
): Record<string, V> | null {
  const out: Record<string, V> = {};
  for (const [key, value] of Object.entries(wanted)) {
    if ((actual?.[key] ?? null) !== value) out[key] = value;
  }
  return Object.keys(out).length > 0 ? out : null;
}

export interface ConditionPatch {
  status: { conditions: Array<DesiredCondition & { lastTransitionTime?: string }> };
}

/**
 * The strategic merge patch for pods/status (conditions merge by `type`, so the kubelet's
 * own conditions are untouched), or null when the pod already shows the condition.
 * lastTransitionTime is sent only when the status changes: fields a strategic merge patch
 * leaves out keep their value.
 */
export function conditionPatch(desired: DesiredPod, pod: Pod | undefined, now: Date): ConditionPatch | null {
  const want = desired.condition;
  const have = findCondition(pod, want.type);
  if (have && have.status === want.status && have.reason === want.reason && have.message === want.message) {
    return null;
  }
  const transition = !have || have.status !== want.status || !have.lastTransitionTime;
  return {
    status: {
      conditions: [transition ? { ...want, lastTransitionTime: kubernetesTime(now) } : { ...want }],
    },
  };
}

export function podShows(desired: DesiredPod, pod: Pod | undefined): boolean {
  return metadataPatch(desired, pod) === null && conditionPatch(desired, pod, new Date(0)) === null;
}

function findCondition(pod: Pod | undefined, type: string): PodCondition | undefined {
  return pod?.status?.conditions?.find((c) => c.type === type);
}

/** RFC 3339 at second precision, the form the API server stores. */
function kubernetesTime(date: Date): string {
  return `${date.toISOString().slice(0, 19)}Z`;
}
