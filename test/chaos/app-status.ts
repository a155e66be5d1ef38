// The chaos pods as the chart lays them out and a kubelet reports them: an application container
// `app` and the sidecar `pglease` as a native sidecar (an init container with `restartPolicy:
// Always`, its status in initContainerStatuses), both running. The app-unready fault flips `app`'s
// ready flag (and the pod's Ready and ContainersReady conditions with it), which is all the health
// gate reads.
import type { V1Pod, V1PodSpec } from "@kubernetes/client-node";
import { type ContainerReport, kubeletPodStatus } from "../support/kube/kubelet-status.ts";

export const CHAOS_POD_SPEC: V1PodSpec = {
  initContainers: [{ name: "pglease", image: "registry.invalid/pglease:1", restartPolicy: "Always" }],
  containers: [{ name: "app", image: "registry.invalid/app:1" }],
};

/** The kubelet's report after a readiness probe of `app` changed its answer. */
export function setAppReady(pod: V1Pod, ready: boolean, now: Date): void {
  pod.status = kubeletPodStatus(pod, { app: { ready } }, now);
}

/**
 * The kubelet's report of the sidecar container (leader-crash-reported): `report` is read from the
 * pod as it is now (its restart count); the application's readiness stays as it was reported.
 */
export function setSidecarStatus(pod: V1Pod, report: (pod: V1Pod) => ContainerReport, now: Date): void {
  const app = pod.status?.containerStatuses?.find((c) => c.name === "app");
  pod.status = kubeletPodStatus(pod, { pglease: report(pod), app: { ready: app?.ready ?? true } }, now);
}

/** The sidecar's run as the kubelet reports it now: its restart count. */
export function sidecarRestarts(pod: V1Pod): number {
  return pod.status?.initContainerStatuses?.find((c) => c.name === "pglease")?.restartCount ?? 0;
}
