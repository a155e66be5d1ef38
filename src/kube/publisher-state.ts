// Everything the publisher knows, in one record. setDesired, the watch and the answers to its
// requests write it; the reconcile step reads it to decide what to send next.
import type { Pod } from "./client/api-types.ts";
import { type DesiredPod, desiredPod, type LeadershipState, podShows } from "./desired-state.ts";
import type { PublishConfig } from "./publish-config.ts";

export interface Desired {
  state: LeadershipState;
  pod: DesiredPod;
  /** Bumped by every change, so a pass in flight can tell it was overtaken. */
  generation: number;
}

export interface PublisherState {
  /** The newest state asked for; null before start. */
  desired: Desired | null;
  /**
   * The uid of this process's pod: POD_UID, or the pod's as first read. Every patch carries it, and
   * a pod of the same name with another uid is not this process's pod.
   */
  uid: string | null;
  /** The pod as last seen (watch, GET or a patch's answer); undefined before the first read or once gone. */
  pod: Pod | undefined;
  /**
   * Why this process's pod is gone for good (deleted, or replaced by a pod of the same name with
   * another uid); null while it exists. A uid never comes back: once gone, nothing more is published.
   */
  gone: string | null;
  /** Read the pod again before the next patch: at start, after a 409 or 404, a watch gap, the resync. */
  podStale: boolean;
  /**
   * The term (see termKey) whose stale peers are already demoted, or, for a follower, the holder in
   * another cluster for which it demoted its own cluster's stale leaders; null when neither.
   */
  peersClearedFor: string | null;
  /** The term and the newer-term peer it last left the leader label to (reconcile's yieldTo). */
  yieldedFor: string | null;
  /**
   * A superseded-by annotation at or above a term's fence (key: term and value), with the count of
   * that term's successful claims and renews when a pass first saw it (reconcile's staleFenceProven).
   */
  fenceRead: { key: string; renewals: number } | null;
  /** Why the last pass failed, until one succeeds. */
  lastError: string | undefined;
  /**
   * The last pass was refused for good: its credentials (401) or its permission (403) are gone,
   * as when `helm uninstall` deletes the ServiceAccount and RBAC while the pods still stop.
   */
  accessRefused: boolean;
  /** No pass writes to the pod until demote() (PodPublisher.holdOwnWrites). */
  held: boolean;
}

export function initialState(uid: string | null): PublisherState {
  return {
    desired: null,
    uid,
    pod: undefined,
    gone: null,
    podStale: true,
    peersClearedFor: null,
    yieldedFor: null,
    fenceRead: null,
    lastError: undefined,
    accessRefused: false,
    held: false,
  };
}

/** Whether the pod as last seen shows the newest desired state. */
export function podShowsDesired(state: PublisherState): boolean {
  return state.desired !== null && podShows(state.desired.pod, state.pod);
}

export function termKey(term: LeadershipState): string {
  return `${term.lease}#${term.fence}`;
}

/**
 * Records `next` as the desired state. Returns the state it replaces (undefined for the first),
 * or null when `next` changes nothing and the call can be ignored.
 */
export function recordDesired(
  state: PublisherState,
  next: LeadershipState,
  config: PublishConfig,
): { previous: LeadershipState | undefined } | null {
  const previous = state.desired?.state;
  if (
    previous &&
    previous.lease === next.lease &&
    previous.role === next.role &&
    previous.fence === next.fence &&
    previous.holder === next.holder &&
    (previous.notCampaigning ?? null) === (next.notCampaigning ?? null)
  ) {
    return null;
  }
  const copy = { ...next };
  state.desired = {
    state: copy,
    pod: desiredPod(copy, config),
    generation: (state.desired?.generation ?? 0) + 1,
  };
  // A later term of this pod must demote its peers again: someone else may have led meanwhile.
  if (copy.role === "follower") state.peersClearedFor = null;
  return { previous };
}

/**
 * A watch event can arrive after a patch response that already showed a newer pod. Resource
 * versions are opaque by contract, but every API server in practice issues increasing integers;
 * when both are, the older one is dropped instead of undoing what the patch response showed.
 */
export function isOlder(incoming: Pod, current: Pod | undefined): boolean {
  const a = incoming.metadata?.resourceVersion;
  const b = current?.metadata?.resourceVersion;
  if (!a || !b || !/^\d+$/.test(a) || !/^\d+$/.test(b)) return false;
  return BigInt(a) < BigInt(b);
}
