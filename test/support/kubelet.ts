// What the kubelet writes that pglease reads: a workload pod with the application's container and
// the sidecar's, and each container's `ready` in the pod's status (the health gate's input).
import type { V1Pod } from "@kubernetes/client-node";
import type { TestKube } from "./kube-servers.ts";

/** A pod of the workload (app + pglease containers), its application's readiness as given. */
export async function seedWorkloadPod(
  kube: TestKube,
  namespace: string,
  name: string,
  labels: Record<string, string>,
  appReady: boolean,
): Promise<void> {
  await kube.seedPod({
    metadata: { name, namespace, labels },
    spec: {
      containers: [
        { name: "app", image: "app:1" },
        { name: "pglease", image: "pglease:1" },
      ],
    },
  } as V1Pod);
  await setAppReady(kube, namespace, name, appReady);
}

/**
 * The kubelet's report of the `app` container (and the pod's Ready and ContainersReady with it).
 * It races the sidecar's patches: a replace on a stale version is refused (409), and the kubelet,
 * like this, reads again and retries.
 */
export async function setAppReady(
  kube: TestKube,
  namespace: string,
  name: string,
  ready: boolean,
): Promise<void> {
  for (let attempt = 1; ; attempt++) {
    try {
      await kube.mutatePod(namespace, name, (pod) => writeStatus(pod, ready));
      return;
    } catch (error) {
      if (attempt >= 5 || !String(error).includes("409")) throw error;
    }
  }
}

function writeStatus(pod: V1Pod, ready: boolean): void {
  const now = new Date();
  pod.status ??= {};
  pod.status.phase = "Running";
  pod.status.containerStatuses = ["app", "pglease"].map((c, i) => ({
    name: c,
    image: `${c}:1`,
    imageID: `${c}@sha256:${"0".repeat(63)}${i}`,
    ready: c === "app" ? ready : true,
    restartCount: 0,
    state: { running: { startedAt: now } },
  }));
  const flag = ready ? "True" : "False";
  pod.status.conditions = [
    { type: "Ready", status: flag, lastTransitionTime: now },
    { type: "ContainersReady", status: flag, lastTransitionTime: now },
    ...(pod.status.conditions ?? []).filter((c) => c.type !== "Ready" && c.type !== "ContainersReady"),
  ];
}
