// Who holds the pod's service-account token, which may patch every pod in the namespace: the
// sidecar alone, through a projected volume at the path the Kubernetes client reads; the pod
// and the ServiceAccount automount nothing; the application gets the token only when a value
// asks. Asserted on what helm renders for charts/pglease, the example chart that uses the
// library, and the plain patch in deploy/sidecar.
import { execFile } from "node:child_process";
import { join } from "node:path";
import { promisify } from "node:util";
import { describe, expect, it } from "vitest";
import {
  type ChartValues,
  isHelmHook,
  kubectlPath,
  kubeTools,
  renderChart,
  repoRoot,
} from "../support/kube/chart.ts";
import { skipBecause } from "../support/skip.ts";
import { renderChartDir } from "./helm.ts";
import { type Manifest, parseManifests } from "./kubernetes-schemas.ts";

const tools = await kubeTools();
const skip = skipBecause("token scope tests", !tools.ok && tools.reason);

const TOKEN_PATH = "/var/run/secrets/kubernetes.io/serviceaccount";
const exampleChart = join(repoRoot, "deploy", "examples", "existing-chart");

interface Mount {
  name: string;
  mountPath: string;
  readOnly?: boolean;
}
interface Container {
  name: string;
  volumeMounts?: Mount[];
}
interface Volume {
  name: string;
  projected?: { sources: Record<string, unknown>[] };
}
interface PodSpec {
  automountServiceAccountToken?: boolean;
  serviceAccountName?: string;
  initContainers?: Container[];
  containers: Container[];
  volumes?: Volume[];
}

function podOf(manifests: Manifest[]): PodSpec {
  const workloads = manifests.filter((m) => m.kind === "Deployment" || m.kind === "StatefulSet");
  expect(workloads).toHaveLength(1);
  return (workloads[0] as unknown as { spec: { template: { spec: PodSpec } } }).spec.template.spec;
}

/** The containers that mount the token path, by name. */
function tokenHolders(pod: PodSpec): string[] {
  return [...(pod.initContainers ?? []), ...pod.containers]
    .filter((c) => (c.volumeMounts ?? []).some((m) => m.mountPath.startsWith(TOKEN_PATH)))
    .map((c) => c.name);
}

/** The volume behind the sidecar's token mount: what the kubelet would otherwise inject. */
function expectProjectedToken(pod: PodSpec, sidecar = "pglease"): void {
  const container = [...(pod.initContainers ?? []), ...pod.containers].find((c) => c.name === sidecar);
  const mount = container?.volumeMounts?.find((m) => m.mountPath === TOKEN_PATH);
  expect(mount?.readOnly).toBe(true);
  const volume = pod.volumes?.find((v) => v.name === mount?.name);
  expect(volume?.projected?.sources).toEqual([
    { serviceAccountToken: { path: "token", expirationSeconds: 3600 } },
    { configMap: { name: "kube-root-ca.crt", items: [{ key: "ca.crt", path: "ca.crt" }] } },
    {
      downwardAPI: {
        items: [{ path: "namespace", fieldRef: { apiVersion: "v1", fieldPath: "metadata.namespace" } }],
      },
    },
  ]);
}

function serviceAccountOf(manifests: Manifest[]): Manifest & { automountServiceAccountToken?: boolean } {
  const accounts = manifests.filter((m) => m.kind === "ServiceAccount" && !isHelmHook(m));
  expect(accounts).toHaveLength(1);
  return accounts[0] as Manifest & { automountServiceAccountToken?: boolean };
}

describe.skipIf(skip)("the service-account token", () => {
  it.each<[string, ChartValues]>([
    ["a native sidecar", {}],
    ["a classic sidecar in a StatefulSet", { sidecar: { native: false }, workload: { kind: "StatefulSet" } }],
  ])("goes to the sidecar alone in charts/pglease (%s)", async (_, values) => {
    const manifests = await renderChart(values);
    const pod = podOf(manifests);
    expect(pod.automountServiceAccountToken).toBe(false);
    expect(serviceAccountOf(manifests).automountServiceAccountToken).toBe(false);
    expect(tokenHolders(pod)).toEqual(["pglease"]);
    expectProjectedToken(pod);
  });

  it("goes to the application too only when app.automountServiceAccountToken asks", async () => {
    const pod = podOf(await renderChart({ app: { automountServiceAccountToken: true } }));
    expect(pod.automountServiceAccountToken).toBe(false);
    expect(tokenHolders(pod).sort()).toEqual(["app", "pglease"]);
    const app = pod.containers.find((c) => c.name === "app");
    const sidecar = pod.initContainers?.find((c) => c.name === "pglease");
    expect(app?.volumeMounts?.find((m) => m.mountPath === TOKEN_PATH)).toEqual(
      sidecar?.volumeMounts?.find((m) => m.mountPath === TOKEN_PATH),
    );
  });

  it("goes to the sidecar alone in a chart that uses the pglease-sidecar library", async () => {
    const manifests = await renderChartDir(exampleChart);
    const pod = podOf(manifests);
    expect(pod.automountServiceAccountToken).toBe(false);
    expect(pod.serviceAccountName).toBe(serviceAccountOf(manifests).metadata.name);
    expect(serviceAccountOf(manifests).automountServiceAccountToken).toBe(false);
    expect(tokenHolders(pod)).toEqual(["pglease"]);
    expectProjectedToken(pod);
  });

  it("goes to the sidecar alone with the plain patch in deploy/sidecar", async () => {
    const { stdout } = await promisify(execFile)(
      kubectlPath,
      [
        "patch",
        "--local",
        "--type",
        "strategic",
        "-o",
        "yaml",
        "-f",
        "test/chart/fixtures/existing-deployment.yaml",
        "--patch-file",
        "deploy/sidecar/sidecar-patch.yaml",
      ],
      { cwd: repoRoot, env: { ...process.env, KUBECONFIG: "/dev/null" } },
    );
    const pod = podOf(parseManifests(stdout, "kubectl patch --local"));
    expect(pod.automountServiceAccountToken).toBe(false);
    expect(tokenHolders(pod)).toEqual(["pglease"]);
    expectProjectedToken(pod);
  });
});
