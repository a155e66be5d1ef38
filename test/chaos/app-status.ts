// The chaos pods as the kubelet reports them: an application container `app` next to the sidecar
// `pglease`, both running. The app-unready fault flips `app`'s ready flag (and the pod's Ready and
// ContainersReady conditions with it), which is all the health gate reads.
import type { V1Container, V1ContainerStatus, V1Pod, V1PodStatus } from "@kubernetes/client-node";

export const APP_CONTAINER = "app";
export const SIDECAR_CONTAINER = "pglease";

export const CHAOS_CONTAINERS: V1Container[] = [
  { name: APP_CONTAINER, image: "registry.invalid/app:1" },
  { name: SIDECAR_CONTAINER, image: "registry.invalid/pglease:1" },
];

function containerStatus(
  container: V1Container,
  index: number,
  ready: boolean,
  now: Date,
): V1ContainerStatus {
  return {
    name: container.name,
    image: container.image ?? "",
    imageID: `${container.image}@sha256:${"0".repeat(63)}${index}`,
    containerID: `containerd://${"c".repeat(63)}${index}`,
    ready,
    started: true,
    restartCount: 0,
    state: { running: { startedAt: now } },
  };
}

/** A Running pod whose containers have started, its application ready or not. */
export function runningStatus(appReady: boolean, now: Date): V1PodStatus {
  const pod: V1Pod = { status: { phase: "Running", startTime: now, podIP: "10.2.0.10" } };
  setAppReady(pod, appReady, now);
  return pod.status ?? {};
}

/** The kubelet's report after a readiness probe of `app` changed its answer. */
export function setAppReady(pod: V1Pod, ready: boolean, now: Date): void {
  pod.status ??= {};
  pod.status.containerStatuses = CHAOS_CONTAINERS.map((c, i) =>
    containerStatus(c, i, c.name === APP_CONTAINER ? ready : true, now),
  );
  const flag = ready ? "True" : "False";
  const others = (pod.status.conditions ?? []).filter(
    (c) => c.type !== "Ready" && c.type !== "ContainersReady",
  );
  pod.status.conditions = [
    ...others,
    { type: "Ready", status: flag, lastTransitionTime: now },
    { type: "ContainersReady", status: flag, lastTransitionTime: now },
  ];
}
