// The pods spread over nodes by default: two candidates on one node fail over nothing when that
// node fails. Soft (ScheduleAnyway), so fewer nodes than replicas still schedule; a user's own
// constraints replace it, and it can be turned off.
import { describe, expect, it } from "vitest";
import { type ChartValues, kubeTools, renderChart } from "../support/kube/chart.ts";
import { skipBecause } from "../support/skip.ts";

const tools = await kubeTools();
const skip = skipBecause("pod spread tests", !tools.ok && tools.reason);

async function spreadOf(values: ChartValues): Promise<unknown> {
  const workload = (await renderChart(values)).find(
    (m) => m.kind === "Deployment" || m.kind === "StatefulSet",
  ) as { spec: { template: { spec: { topologySpreadConstraints?: unknown } } } } | undefined;
  return workload?.spec.template.spec.topologySpreadConstraints;
}

describe.skipIf(skip)("the pods' spread", () => {
  it.each<[string, ChartValues]>([
    ["a Deployment", {}],
    ["a StatefulSet", { workload: { kind: "StatefulSet" } }],
  ])("is over nodes, softly, by default (%s)", async (_, values) => {
    expect(await spreadOf(values)).toEqual([
      {
        maxSkew: 1,
        topologyKey: "kubernetes.io/hostname",
        whenUnsatisfiable: "ScheduleAnyway",
        labelSelector: {
          matchLabels: { "app.kubernetes.io/name": "pglease", "app.kubernetes.io/instance": "pglease" },
        },
      },
    ]);
  });

  it("is the user's own constraints when set, and none with spreadAcrossNodes false", async () => {
    const zones = [
      {
        maxSkew: 1,
        topologyKey: "topology.kubernetes.io/zone",
        whenUnsatisfiable: "DoNotSchedule",
        labelSelector: { matchLabels: { "app.kubernetes.io/instance": "pglease" } },
      },
    ];
    expect(await spreadOf({ workload: { topologySpreadConstraints: zones } })).toEqual(zones);
    expect(await spreadOf({ workload: { spreadAcrossNodes: false } })).toBeUndefined();
  });
});
