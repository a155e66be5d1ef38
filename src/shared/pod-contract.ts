// What pglease promises to show on a pod, for everything that reads it: the sidecar's publisher
// writes it, the downward-API reader, a Service selector, `kubectl` and the CLI's help text read
// it. The names below are the defaults; an operator may rename each (kube/publish-config.ts).
// Free of the Kubernetes client, so an application that only reads a pod never loads it.
import { parseFence } from "./fence-token.ts";

export const ROLE = { leader: "leader", follower: "follower" } as const;
export type Role = (typeof ROLE)[keyof typeof ROLE];

export const POD_CONTRACT = {
  /** Label carrying the role; a Service adds it to the workload's selector to reach the leader. */
  roleLabel: "pglease.io/role",
  leaderValue: ROLE.leader,
  followerValue: ROLE.follower,
  /** The fencing token of the pod's current term; absent when it holds none. */
  fenceAnnotation: "pglease.io/fence",
  /** Who holds the lease as far as the pod knows; absent when unknown. */
  holderAnnotation: "pglease.io/holder",
  /** The lease the pod shows, so peers of another lease are told apart. */
  leaseAnnotation: "pglease.io/lease",
  /**
   * With --cluster-name: the cluster whose pod holds the lease, on every campaigning pod of every
   * cluster (absent while unknown), so `kubectl` in one cluster shows where the leader runs.
   */
  leaderClusterAnnotation: "pglease.io/leader-cluster",
  /** Pod condition, True while the pod leads; not a readiness gate unless the operator opts in. */
  conditionType: "pglease.io/leader",
  /**
   * Why the pod does not campaign now (its health gate: unready, or settling after a health
   * handover); absent while it campaigns. An unready leader hands over only to a pod without it.
   */
  notCampaigningAnnotation: "pglease.io/not-campaigning",
  /**
   * The fence of the newest term that fenced this pod off (written by a new leader on every peer
   * before it labels itself): a term of this pod at or below it never labels it leader, and the
   * API server refuses such a label still on its way (guarded-patch.ts).
   */
  supersededAnnotation: "pglease.io/superseded-by",
} as const;

export const CONDITION_REASON = { held: "LeaseHeld", notHeld: "LeaseNotHeld" } as const;

/**
 * The labels a new leader builds its peer selector from when none is configured; the pods of
 * one workload share them, and the role label is never among them.
 */
export const PEER_SELECTOR_LABELS = ["app.kubernetes.io/name", "app.kubernetes.io/instance"] as const;

/** The fence annotation's value: the fence in decimal, or null (annotation removed) when there is none. */
export function fenceAnnotationValue(fence: number | null): string | null {
  return fence === null ? null : String(fence);
}

/**
 * Reads a fence annotation's value: null when absent or empty (a follower, or a projected file
 * of a missing key); throws a RangeError naming `field` when it is not a fence.
 */
export function fenceFromAnnotation(value: string | null | undefined, field: string): number | null {
  if (value === undefined || value === null || value === "") return null;
  return parseFence(value, field);
}
