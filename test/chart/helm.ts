// `helm template` for any chart directory (charts/pglease has its own helpers in
// test/support/kube/chart.ts): the example chart under deploy/examples and charts that use the library.
import { execFile } from "node:child_process";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { helmPath, kubeTools } from "../support/kube/chart.ts";
import { type Manifest, parseManifests } from "./kubernetes-schemas.ts";

const run = promisify(execFile);

/** The rendered YAML, or helm's error text. */
export async function templateChart(
  dir: string,
  values: Record<string, unknown> = {},
  release = "orders",
  apiVersions: string[] = [],
): Promise<{ ok: true; yaml: string } | { ok: false; error: string }> {
  const available = await kubeTools();
  if (!available.ok) throw new Error(available.reason);
  const tmp = await mkdtemp(join(tmpdir(), "pglease-helm-"));
  try {
    await writeFile(join(tmp, "values.json"), JSON.stringify(values));
    const args = ["template", release, dir, "--values", join(tmp, "values.json"), "--namespace", "shop"];
    for (const version of apiVersions) args.push("--api-versions", version);
    const { stdout } = await run(helmPath, args, { maxBuffer: 16 * 1024 * 1024 });
    return { ok: true, yaml: stdout };
  } catch (error) {
    return { ok: false, error: String((error as { stderr?: string }).stderr ?? error) };
  } finally {
    await rm(tmp, { recursive: true, force: true });
  }
}

/** Every object the chart renders, parsed. Throws with helm's message when it refuses. */
export async function renderChartDir(
  dir: string,
  values: Record<string, unknown> = {},
  release = "orders",
  apiVersions: string[] = [],
): Promise<Manifest[]> {
  const rendered = await templateChart(dir, values, release, apiVersions);
  if (!rendered.ok) throw new Error(`helm template ${dir} failed: ${rendered.error}`);
  return parseManifests(rendered.yaml, `helm template ${dir}`);
}
