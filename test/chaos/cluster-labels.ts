// The label rule across Kubernetes clusters: at most one pod of all clusters carries the leader
// label. Within a cluster a new leader demotes stale peers before labelling itself, so there it
// never bends (the two-labelled rule). Across clusters the new leader cannot reach the others:
// there its cluster's followers take a stale label off once they see the new holder. So a stale
// label in another cluster than the holder's is excused only for `graceMs` after the change of
// hands, or after the end of a window in which that cluster could not act (its API server down,
// no follower running): the documented bound, tested rather than assumed.
import type { LabelChange } from "./history.ts";
import type { Interval } from "./timeline.ts";
import type { Violation } from "./violation.ts";

export interface ClusterLabels {
  cluster: string;
  /** This cluster's role-label changes as its API server recorded them. */
  changes: readonly LabelChange[];
  /** When nothing in this cluster could take a stale label off (API server down, no follower running). */
  unable?: readonly Interval[];
}

/** A change of hands from the lease history: when, and the cluster the new holder names. */
export interface HandOver {
  at: number;
  cluster: string | null;
}

interface Step {
  time: number;
  pod: string;
  cluster: string;
  role: string | null;
}

/** Each cluster in its API server's order, merged by time. */
function steps(clusters: readonly ClusterLabels[]): Step[] {
  return clusters
    .flatMap((c) =>
      [...c.changes]
        .sort((a, b) => a.resourceVersion - b.resourceVersion)
        .map((change) => ({
          time: change.time,
          pod: `${c.cluster}/${change.pod}`,
          cluster: c.cluster,
          role: change.role,
        })),
    )
    .sort((a, b) => a.time - b.time);
}

export function crossClusterLabels(
  clusters: readonly ClusterLabels[],
  handOvers: readonly HandOver[],
  graceMs: number,
): Violation[] {
  const roles = new Map<string, Step>();
  const out: Violation[] = [];
  let open: { at: number; pods: Set<string>; clusters: Set<string> } | null = null;
  const close = (at: number | null) => {
    if (!open) return;
    const window = open;
    open = null;
    if (at !== null && excused(window, at, clusters, handOvers, graceMs)) return;
    out.push({
      rule: "two-labelled-across-clusters",
      at: window.at,
      detail:
        at === null
          ? `pods ${[...window.pods].join(", ")} still labelled leader in more than one cluster`
          : `pods ${[...window.pods].join(", ")} carried the leader label in more than one cluster for ${at - window.at} ms`,
    });
  };
  for (const step of steps(clusters)) {
    roles.set(step.pod, step);
    const labelled = [...roles.values()].filter((s) => s.role === "leader");
    if (new Set(labelled.map((s) => s.cluster)).size > 1) {
      open ??= { at: step.time, pods: new Set(), clusters: new Set() };
      for (const s of labelled) {
        open.pods.add(s.pod);
        open.clusters.add(s.cluster);
      }
    } else {
      close(step.time);
    }
  }
  close(null);
  return out;
}

/**
 * Every cluster but the holder's took its stale label off within the grace: of the last change of
 * hands before the overlap began, or of the end of a window in which that cluster could not act.
 */
function excused(
  window: { at: number; clusters: Set<string> },
  end: number,
  clusters: readonly ClusterLabels[],
  handOvers: readonly HandOver[],
  graceMs: number,
): boolean {
  const handOver = handOvers.filter((h) => h.at <= window.at).at(-1);
  if (!handOver) return false;
  return [...window.clusters]
    .filter((c) => c !== handOver.cluster)
    .every((cluster) => {
      if (end - handOver.at <= graceMs) return true;
      const unable = clusters.find((c) => c.cluster === cluster)?.unable ?? [];
      return unable.some((u) => u.from <= Math.max(window.at, handOver.at) && end - u.to <= graceMs);
    });
}
