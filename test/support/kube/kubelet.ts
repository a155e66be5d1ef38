// What the kubelet writes that pglease reads: a workload pod laid out as the chart lays it out (the
// application's container `app`, and the sidecar `pglease` as a native sidecar, an init container
// with `restartPolicy: Always`, or with sidecar.native=false a second container), and each
// container's status where a kubelet writes it (kubelet-status.ts; the health gate's input).
import type { V1PodSpec } from "@kubernetes/client-node";
import type { TestKube } from "./kube-servers.ts";
import { kubeletPodStatus } from "./kubelet-status.ts";

export type SidecarLayout = "native" | "container";

/** The workload pod's containers as the chart renders them (the chart's default: a native sidecar). */
export function workloadPodSpec(layout: SidecarLayout = "native"): V1PodSpec {
  const app = { name: "app", image: "app:1" };
  const sidecar = { name: "pglease", image: "pglease:1" };
  return layout === "native"
    ? { initContainers: [{ ...sidecar, restartPolicy: "Always" }], containers: [app] }
    : { containers: [app, sidecar] };
}

/** A pod of the workload (app + pglease containers), its application's readiness as given. */
export async function seedWorkloadPod(
  kube: TestKube,
  namespace: string,
  name: string,
  labels: Record<string, string>,
  appReady: boolean,
  layout: SidecarLayout = "native",
): Promise<void> {
  await kube.seedPod({ metadata: { name, namespace, labels }, spec: workloadPodSpec(layout) });
  if (!appReady) await setAppReady(kube, namespace, name, false);
}

/**
 * The kubelet's report after a probe of the `app` container changed its answer (the pod's Ready
 * and ContainersReady with it). It races the sidecar's patches: a replace on a stale version is
 * refused (409), and the kubelet, like this, reads again and retries.
 */
export async function setAppReady(
  kube: TestKube,
  namespace: string,
  name: string,
  ready: boolean,
): Promise<void> {
  for (let attempt = 1; ; attempt++) {
    try {
      await kube.mutatePod(namespace, name, (pod) => {
        pod.status = kubeletPodStatus(pod, { app: { ready } });
      });
      return;
    } catch (error) {
      if (attempt >= 5 || !String(error).includes("409")) throw error;
    }
  }
}
