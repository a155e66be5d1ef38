// deploy/examples/across-clusters: both values files render with the chart, name their cluster to
// the sidecar, and share everything the clusters must agree on (the lease, the database).
import { readFile } from "node:fs/promises";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { parse } from "yaml";
import { kubeTools, renderChart, repoRoot } from "../support/kube/chart.ts";
import { skipBecause } from "../support/skip.ts";

const tools = await kubeTools();
const skip = skipBecause("across-clusters example", !tools.ok && tools.reason);
const example = join(repoRoot, "deploy", "examples", "across-clusters");

interface Container {
  name: string;
  env?: Array<{ name: string; value?: string }>;
}

async function values(cluster: string): Promise<Record<string, unknown>> {
  return parse(await readFile(join(example, `values-${cluster}.yaml`), "utf8"));
}

async function sidecarEnv(cluster: string): Promise<Record<string, string | undefined>> {
  const manifests = await renderChart(await values(cluster), { release: "orders", namespace: "orders" });
  const deployment = manifests.find((m) => m.kind === "Deployment") as unknown as {
    spec: { template: { spec: { initContainers: Container[] } } };
  };
  const sidecar = deployment.spec.template.spec.initContainers.find((c) => c.name === "pglease");
  return Object.fromEntries((sidecar?.env ?? []).map((e) => [e.name, e.value]));
}

describe.skipIf(skip)("the across-clusters example", () => {
  it("renders for each cluster, naming it to the sidecar, with the same lease", async () => {
    const [east, west] = await Promise.all([sidecarEnv("east"), sidecarEnv("west")]);
    expect(east).toMatchObject({ PGLEASE_CLUSTER_NAME: "east", PGLEASE_LEASE: "orders-sync" });
    expect(west).toMatchObject({ PGLEASE_CLUSTER_NAME: "west", PGLEASE_LEASE: "orders-sync" });
  });

  it("differs between the clusters only in the cluster's name and its DNS record's identity", async () => {
    const [east, west] = await Promise.all([values("east"), values("west")]);
    const strip = (v: Record<string, unknown>) => {
      const copy = structuredClone(v) as { cluster?: unknown; leaderService: { annotations: object } };
      delete copy.cluster;
      copy.leaderService.annotations = {};
      return copy;
    };
    expect(strip(west)).toEqual(strip(east));
  });

  it("exports the leader Service the chart renders under that release", async () => {
    const manifests = await renderChart(await values("east"), { release: "orders", namespace: "orders" });
    const leader = manifests.find((m) => m.kind === "Service" && m.metadata.name.endsWith("-leader"));
    const exported = parse(await readFile(join(example, "service-export.yaml"), "utf8"));
    expect(exported.metadata).toEqual({ name: leader?.metadata.name, namespace: "orders" });
  });
});
