// Installs the chart on the K3s cluster the way a user would, minus helm's release bookkeeping:
// `helm template` with the repo's helm, then every object (test hooks aside) created through the
// API. What the tests need to find the release again is read from the rendered objects, not
// assumed from the chart's naming.
import {
  CoreV1Api,
  type KubeConfig,
  type KubernetesObject,
  KubernetesObjectApi,
  VersionApi,
} from "@kubernetes/client-node";
import type { Manifest } from "../chart/kubernetes-schemas.ts";
import { isHelmHook, renderChart } from "../support/chart.ts";

export const LEASE_DURATION_MS = 6_000;
export const REPLICAS = 3;
const RELEASE = "failover";
const ROLE_LABEL = "pglease.io/role";

// The application container only holds the pod open; running it from the pglease image saves
// loading another image. It must exit on SIGTERM: node as PID 1 without a handler ignores the
// signal, and a native sidecar is stopped only after the application has exited.
const APP_COMMAND = [
  "node",
  "-e",
  "process.on('SIGTERM', () => process.exit(0)); setInterval(() => {}, 1 << 30);",
];

export interface InstalledRelease {
  namespace: string;
  /** The workload's selector as a label selector (it never includes the role label). */
  podSelector: string;
  leaderServiceName: string;
  sidecarContainer: string;
}

export interface ReleaseOptions {
  namespace: string;
  image: { repository: string; tag: string };
  databaseUrl: string;
}

export async function installRelease(
  kubeConfig: KubeConfig,
  options: ReleaseOptions,
): Promise<InstalledRelease> {
  const image = { ...options.image, pullPolicy: "Never" };
  const { gitVersion } = await kubeConfig.makeApiClient(VersionApi).getCode();
  const manifests = await renderChart(
    {
      workload: { replicas: REPLICAS },
      sidecar: { image },
      app: { image, command: APP_COMMAND },
      database: { url: options.databaseUrl },
      lease: { duration: `${LEASE_DURATION_MS / 1000}s` },
    },
    {
      release: RELEASE,
      namespace: options.namespace,
      // The chart checks the cluster's version (native sidecars need 1.29); "+k3s1" is build metadata.
      kubeVersion: gitVersion.replace(/\+.*$/, ""),
      withoutBaseValues: true,
    },
  ).then((all) => all.filter((manifest) => !isHelmHook(manifest)));

  await kubeConfig
    .makeApiClient(CoreV1Api)
    .createNamespace({ body: { metadata: { name: options.namespace } } });
  const objects = KubernetesObjectApi.makeApiClient(kubeConfig);
  // helm template emits objects in install order: the ServiceAccount and Role before the workload.
  for (const manifest of manifests) {
    await objects.create({
      ...manifest,
      metadata: { ...manifest.metadata, namespace: options.namespace },
    } as KubernetesObject);
  }
  return describeRelease(manifests, options.namespace);
}

function describeRelease(manifests: Manifest[], namespace: string): InstalledRelease {
  const deployment = only(manifests, (m) => m.kind === "Deployment", "Deployment");
  const spec = deployment.spec as {
    selector: { matchLabels: Record<string, string> };
    template: { spec: { initContainers?: { name: string; args?: string[] }[] } };
  };
  const leaderService = only(
    manifests,
    (m) =>
      m.kind === "Service" &&
      (m.spec as { selector?: Record<string, string> }).selector?.[ROLE_LABEL] === "leader",
    "leader Service",
  );
  const sidecar = spec.template.spec.initContainers?.find((c) => c.args?.[0] === "run");
  if (!sidecar)
    throw new Error(
      "the rendered Deployment has no native pglease sidecar (an init container running `run`)",
    );
  return {
    namespace,
    podSelector: Object.entries(spec.selector.matchLabels)
      .map(([key, value]) => `${key}=${value}`)
      .join(","),
    leaderServiceName: leaderService.metadata.name,
    sidecarContainer: sidecar.name,
  };
}

function only(manifests: Manifest[], match: (m: Manifest) => boolean, what: string): Manifest {
  const found = manifests.filter(match);
  if (found.length !== 1 || !found[0])
    throw new Error(`expected one ${what} in the rendered chart, found ${found.length}`);
  return found[0];
}
