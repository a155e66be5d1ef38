// How a peer's pod is judged as a candidate for a health handover, and how this pod's own
// application is judged, on pods shaped as the chart renders them and a kubelet reports them: with
// the chart's default native sidecar the sidecar's status is in initContainerStatuses.
import type { V1Pod } from "@kubernetes/client-node";
import { beforeAll, describe, expect, it } from "vitest";
import { applicationReadiness, containersReady, isHealthyCandidate } from "../../src/kube/app-readiness.ts";
import type { Pod } from "../../src/kube/client/api-types.ts";
import { renderChart } from "../support/kube/chart.ts";
import { type ContainerReport, kubeletPodStatus } from "../support/kube/kubelet-status.ts";

function peer(conditions: Record<string, "True" | "False">, annotations: Record<string, string> = {}): Pod {
  return {
    metadata: { name: "orders-1", annotations },
    status: { conditions: Object.entries(conditions).map(([type, status]) => ({ type, status })) },
  } as Pod;
}

describe("a candidate by its pod's conditions (--health-gate url)", () => {
  it("is ready by ContainersReady: a readiness gate on the leader condition keeps a follower's Ready False", () => {
    expect(containersReady(peer({ Ready: "False", ContainersReady: "True" }))).toBe(true);
    expect(containersReady(peer({ Ready: "True", ContainersReady: "False" }))).toBe(false);
    expect(containersReady(peer({ Ready: "True" }))).toBe(false);
  });

  it("is no candidate while it does not campaign or is going away", () => {
    const settling = peer({ ContainersReady: "True" }, { "pglease.io/not-campaigning": "settle period" });
    expect(containersReady(settling)).toBe(false);
    const going = peer({ ContainersReady: "True" });
    going.metadata = { ...going.metadata, deletionTimestamp: "2026-12-01T00:00:00Z" };
    expect(containersReady(going)).toBe(false);
  });
});

const RULE = { appContainers: null, sidecarContainer: "pglease" };

/** The chart's pod template with `values`, as the kubelet reports it: each container as `report` says. */
async function chartPodSpec(values: Record<string, unknown>): Promise<V1Pod["spec"]> {
  const manifests = await renderChart(values);
  const deployment = manifests.find((m) => m.kind === "Deployment") as unknown as {
    spec: { template: { spec: V1Pod["spec"] } };
  };
  return deployment.spec.template.spec;
}

for (const [layout, native] of [
  ["a native sidecar (the chart's default)", true],
  ["a classic sidecar (sidecar.native=false)", false],
] as const) {
  describe(`the kubelet's report of a pod with ${layout} (--health-gate pod)`, () => {
    let spec: V1Pod["spec"];
    beforeAll(async () => {
      spec = await chartPodSpec({ sidecar: { native } });
    });
    const pod = (report: Record<string, ContainerReport>): Pod => {
      const shaped: V1Pod = { metadata: { name: "orders-1", uid: "u-1", generation: 1 }, spec };
      shaped.status = kubeletPodStatus(shaped, report, new Date("2026-12-01T12:00:00Z"));
      return JSON.parse(JSON.stringify(shaped)) as Pod;
    };

    it("puts the sidecar's status where a kubelet does", () => {
      const shaped = pod({}) as V1Pod;
      const inits = shaped.status?.initContainerStatuses?.map((c) => c.name) ?? [];
      const containers = shaped.status?.containerStatuses?.map((c) => c.name) ?? [];
      expect(inits.includes("pglease")).toBe(native);
      expect(containers.includes("pglease")).toBe(!native);
      expect(containers).toContain("app");
    });

    it("is a healthy candidate while its application is ready and its sidecar runs", () => {
      expect(isHealthyCandidate(pod({}), RULE)).toBe(true);
      expect(applicationReadiness(pod({}), RULE)).toEqual({ ready: true, detail: "app ready" });
    });

    it("is no candidate while its application is unready", () => {
      expect(isHealthyCandidate(pod({ app: { ready: false } }), RULE)).toBe(false);
      expect(applicationReadiness(pod({ app: { ready: false } }), RULE).ready).toBe(false);
    });

    it("is no candidate while its sidecar is down (crashed, waiting for its restart)", () => {
      expect(isHealthyCandidate(pod({ pglease: { running: false, restartCount: 1 } }), RULE)).toBe(false);
    });

    it("judges the application by the containers besides the sidecar: an unready sidecar is not the application", () => {
      expect(applicationReadiness(pod({ pglease: { ready: false } }), RULE)).toEqual({
        ready: true,
        detail: "app ready",
      });
    });

    it("judges named application containers, wherever their status is", () => {
      const named = { appContainers: ["app", "pglease"], sidecarContainer: "other" };
      expect(applicationReadiness(pod({}), named).ready).toBe(true);
      expect(applicationReadiness(pod({ pglease: { ready: false } }), named)).toEqual({
        ready: false,
        detail: "container pglease not ready",
      });
    });
  });
}
