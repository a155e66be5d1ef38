// The application's health as the kubelet reports it on the pod: the `ready` flag of the
// application's containers (every container but the sidecar's own, unless they are named). It is
// read from pods the publisher already sees (its own pod's watch, the peer list): no extra request.
// The kubelet reports an init container in status.initContainerStatuses, and so a native sidecar
// (an init container with `restartPolicy: Always`, the chart's default for pglease); the other
// containers in status.containerStatuses.

import { POD_CONTRACT } from "../shared/pod-contract.ts";
import type { ContainerStatus, Pod } from "./client/api-types.ts";

export interface ReadinessRule {
  /** The application's containers; null: every container but the sidecar's. */
  appContainers: readonly string[] | null;
  /** This sidecar's own container, never judged as the application. */
  sidecarContainer: string;
}

export interface Readiness {
  ready: boolean;
  /** Which containers are not ready and why, or what was judged ready: the log line's words. */
  detail: string;
}

export function applicationReadiness(pod: Pod, rule: ReadinessRule): Readiness {
  const statuses = pod.status?.containerStatuses ?? [];
  const named = rule.appContainers;
  // Named containers may be native sidecars too; unnamed, the application is the pod's containers.
  const everyStatus = [...(pod.status?.initContainerStatuses ?? []), ...statuses];
  const judged = named
    ? everyStatus.filter((c) => named.includes(c.name))
    : statuses.filter((c) => c.name !== rule.sidecarContainer);
  const missing = named ? named.filter((name) => !everyStatus.some((c) => c.name === name)) : [];
  if (missing.length > 0)
    return { ready: false, detail: `no status yet for container ${missing.join(", ")}` };
  if (judged.length === 0) {
    return statuses.length === 0
      ? { ready: false, detail: "no container status yet" }
      : { ready: true, detail: "no application container besides the sidecar" };
  }
  const unready = judged.filter((c) => !c.ready);
  if (unready.length === 0) return { ready: true, detail: `${judged.map((c) => c.name).join(", ")} ready` };
  return { ready: false, detail: unready.map(describe).join("; ") };
}

/**
 * A peer that could lead in this pod's place: not going away, campaigning (its sidecar shows no
 * reason not to, e.g. a settle period after a health handover), its application and sidecar up.
 */
export function isHealthyCandidate(pod: Pod, rule: ReadinessRule): boolean {
  if (pod.metadata?.deletionTimestamp) return false;
  if (pod.metadata?.annotations?.[POD_CONTRACT.notCampaigningAnnotation]) return false;
  const sidecar = [
    ...(pod.status?.initContainerStatuses ?? []),
    ...(pod.status?.containerStatuses ?? []),
  ].find((c) => c.name === rule.sidecarContainer);
  if (!sidecar?.state?.running) return false;
  return applicationReadiness(pod, rule).ready;
}

/**
 * A peer that could lead, judged by its pod's conditions (`--health-gate url`, where the peers' own
 * URLs are not reachable from here): ContainersReady, not Ready, since a readiness gate on the
 * leader condition keeps a follower's Ready False.
 */
export function containersReady(pod: Pod): boolean {
  if (pod.metadata?.deletionTimestamp) return false;
  if (pod.metadata?.annotations?.[POD_CONTRACT.notCampaigningAnnotation]) return false;
  return pod.status?.conditions?.some((c) => c.type === "ContainersReady" && c.status === "True") ?? false;
}

function describe(c: ContainerStatus): string {
  const why = c.state?.waiting?.reason ?? c.state?.terminated?.reason;
  return `container ${c.name} not ready${why ? ` (${why})` : ""}`;
}
