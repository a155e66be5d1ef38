// Renders charts/pglease with the real helm binary (fetched once into .tools/ by
// test/chart/fetch-kube-tools.sh) so tests can hold what the chart produces: the chart tests
// assert on it, and the Kubernetes tests feed the Role it renders to their API server, so the
// permissions they run under are exactly the ones the chart grants.
import { execFile } from "node:child_process";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import type { V1Role } from "@kubernetes/client-node";
import { type Manifest, parseManifests } from "../../chart/kubernetes-schemas.ts";

const run = promisify(execFile);

export const repoRoot = join(import.meta.dirname, "..", "..", "..");
export const chartDir = join(repoRoot, "charts", "pglease");
export const helmPath = join(repoRoot, ".tools", "helm", "helm");
export const kubectlPath = join(repoRoot, ".tools", "kubectl", "kubectl");

/** Values the chart cannot default (where the database is), merged under the caller's. */
export const BASE_VALUES = { database: { existingSecret: "pglease-database" } };

export type ChartValues = Record<string, unknown>;

export interface RenderOptions {
  /** Another chart's directory (an example, a chart that uses the library); charts/pglease by default. */
  chart?: string;
  release?: string;
  namespace?: string;
  /** Kubernetes version for .Capabilities (helm's default otherwise). */
  kubeVersion?: string;
  /** API versions for .Capabilities beyond helm's defaults (group/version/Kind). */
  apiVersions?: string[];
  /** Leave out BASE_VALUES, to test what the chart says without them. */
  withoutBaseValues?: boolean;
}

let tools: Promise<{ ok: true } | { ok: false; reason: string }> | undefined;

/** Fetches helm and kubectl once per process; the reason says why they are missing. */
export function kubeTools(): Promise<{ ok: true } | { ok: false; reason: string }> {
  tools ??= run("bash", [join(repoRoot, "test", "chart", "fetch-kube-tools.sh")], { cwd: repoRoot }).then(
    () => ({ ok: true as const }),
    (error: { stderr?: string; message: string }) => ({
      ok: false as const,
      reason: `helm could not be fetched (${(error.stderr || error.message).trim().split("\n").pop()})`,
    }),
  );
  return tools;
}

/** `helm template` with the given values; the outcome is the YAML or helm's error text. */
export async function helmTemplate(
  values: ChartValues = {},
  options: RenderOptions = {},
): Promise<{ ok: true; yaml: string } | { ok: false; error: string }> {
  const available = await kubeTools();
  if (!available.ok) throw new Error(available.reason);
  const dir = await mkdtemp(join(tmpdir(), "pglease-chart-"));
  try {
    const files: string[] = [];
    for (const [name, content] of [
      ["base.json", options.withoutBaseValues ? {} : BASE_VALUES],
      ["values.json", values],
    ] as const) {
      await writeFile(join(dir, name), JSON.stringify(content));
      files.push("--values", join(dir, name));
    }
    const args = ["template", options.release ?? "pglease", options.chart ?? chartDir, ...files];
    args.push("--namespace", options.namespace ?? "pglease-test");
    if (options.kubeVersion) args.push("--kube-version", options.kubeVersion);
    for (const version of options.apiVersions ?? []) args.push("--api-versions", version);
    try {
      const { stdout } = await run(helmPath, args, { maxBuffer: 16 * 1024 * 1024 });
      return { ok: true, yaml: stdout };
    } catch (error) {
      return { ok: false, error: String((error as { stderr?: string }).stderr ?? error) };
    }
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

/** Every object the chart renders (test hooks included), parsed. Throws when helm refuses. */
export async function renderChart(
  values: ChartValues = {},
  options: RenderOptions = {},
): Promise<Manifest[]> {
  const rendered = await helmTemplate(values, options);
  if (!rendered.ok) throw new Error(`helm template failed: ${rendered.error}`);
  return parseManifests(rendered.yaml, "helm template charts/pglease");
}

/** What `.Capabilities` has on Kubernetes >= 1.30, where the chart installs its admission policy. */
export const ADMISSION_POLICY_API = "admissionregistration.k8s.io/v1/ValidatingAdmissionPolicy";

/** True for objects helm creates only around an operation (here: the `helm test` pod and its RBAC). */
export function isHelmHook(manifest: Manifest): boolean {
  const annotations = manifest.metadata.annotations as Record<string, string> | undefined;
  return annotations?.["helm.sh/hook"] !== undefined;
}

/** The Role the chart grants the sidecar (not the helm test's own Role). */
export async function renderChartRole(values: ChartValues = {}): Promise<V1Role> {
  const roles = (await renderChart(values)).filter((m) => m.kind === "Role" && !isHelmHook(m));
  if (roles.length !== 1) throw new Error(`expected one sidecar Role from the chart, found ${roles.length}`);
  return roles[0] as unknown as V1Role;
}
