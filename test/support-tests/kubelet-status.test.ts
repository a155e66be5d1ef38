// The tests' kubelet writes what a 1.35 kubelet writes (pkg/kubelet/kubelet_pods.go,
// status/generate.go, prober/prober_manager.go): the rules pglease's readers depend on, pinned.
import type { V1Pod } from "@kubernetes/client-node";
import { describe, expect, it } from "vitest";
import { kubeletPodStatus } from "../support/kube/kubelet-status.ts";

const NOW = new Date("2026-12-01T12:00:00Z");
const LATER = new Date("2026-12-01T12:00:05Z");

function pod(extra: Partial<NonNullable<V1Pod["spec"]>> = {}): V1Pod {
  return {
    metadata: { name: "orders-1", uid: "u-1", generation: 2 },
    spec: {
      initContainers: [
        { name: "migrate", image: "migrate:1" },
        { name: "pglease", image: "pglease:1", restartPolicy: "Always" },
      ],
      containers: [
        { name: "worker", image: "app:1" },
        { name: "app", image: "app:1" },
      ],
      ...extra,
    },
  };
}

const condition = (status: V1Pod["status"], type: string) => status?.conditions?.find((c) => c.type === type);

describe("the tests' kubelet", () => {
  it("reports init containers in spec order (a native sidecar among them), the others sorted by name", () => {
    const status = kubeletPodStatus(pod(), {}, NOW);
    expect(status.initContainerStatuses?.map((c) => c.name)).toEqual(["migrate", "pglease"]);
    expect(status.containerStatuses?.map((c) => c.name)).toEqual(["app", "worker"]);
    expect(status.initContainerStatuses?.[0]).toMatchObject({
      ready: true,
      started: false,
      state: { terminated: { exitCode: 0, reason: "Completed" } },
    });
    expect(status.initContainerStatuses?.[1]).toMatchObject({
      ready: true,
      started: true,
      state: { running: { startedAt: NOW } },
    });
    expect(status.initContainerStatuses?.[1]?.containerID).toMatch(/^containerd:\/\/[0-9a-f]{64}$/);
  });

  it("writes its conditions after the others, in its order, with the pod's generation", () => {
    const before = pod();
    before.status = { conditions: [{ type: "pglease.io/leader", status: "True" }] };
    const status = kubeletPodStatus(before, {}, NOW);
    expect(status.conditions?.map((c) => c.type)).toEqual([
      "pglease.io/leader",
      "PodReadyToStartContainers",
      "Initialized",
      "Ready",
      "ContainersReady",
      "PodScheduled",
    ]);
    expect(status.observedGeneration).toBe(2);
    expect(condition(status, "Ready")?.observedGeneration).toBe(2);
  });

  it("counts a native sidecar's readiness toward ContainersReady and Ready, not a completed init container's", () => {
    const status = kubeletPodStatus(pod(), { pglease: { running: false, restartCount: 1 } }, NOW);
    expect(status.initContainerStatuses?.[1]).toMatchObject({
      ready: false,
      started: false,
      restartCount: 1,
      state: { waiting: { reason: "CrashLoopBackOff" } },
    });
    expect(condition(status, "ContainersReady")).toMatchObject({
      status: "False",
      reason: "ContainersNotReady",
      message: "containers with unready status: [pglease]",
    });
    expect(condition(status, "Ready")).toMatchObject({ status: "False", reason: "ContainersNotReady" });
  });

  it("keeps Ready False on a readiness gate whose condition is not True", () => {
    const gated = pod({ readinessGates: [{ conditionType: "pglease.io/leader" }] });
    gated.status = { conditions: [{ type: "pglease.io/leader", status: "False" }] };
    const status = kubeletPodStatus(gated, {}, NOW);
    expect(condition(status, "ContainersReady")?.status).toBe("True");
    expect(condition(status, "Ready")).toMatchObject({ status: "False", reason: "ReadinessGatesNotReady" });
  });

  it("keeps a container's run across reports, and starts a new one (new ID) on a restart", () => {
    const first = pod();
    first.status = kubeletPodStatus(first, {}, NOW);
    const again = kubeletPodStatus(first, { app: { ready: false } }, LATER);
    const sidecar = (s: typeof again) => s.initContainerStatuses?.find((c) => c.name === "pglease");
    expect(sidecar(again)).toEqual(sidecar(first.status));
    expect(condition(again, "Ready")?.lastTransitionTime).toBe(LATER);
    expect(condition(again, "PodScheduled")?.lastTransitionTime).toBe(NOW);
    const restarted = kubeletPodStatus(first, { pglease: { restartCount: 1 } }, LATER);
    expect(sidecar(restarted)?.restartCount).toBe(1);
    expect(sidecar(restarted)?.state?.running?.startedAt).toBe(LATER);
    expect(sidecar(restarted)?.containerID).not.toBe(sidecar(first.status)?.containerID);
  });
});
