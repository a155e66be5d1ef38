// `helm template` for any chart directory: the example chart under deploy/examples and charts
// that use the library, through the one helm runner of test/support/kube/chart.ts (without the
// pglease chart's base values).
import { helmTemplate } from "../support/kube/chart.ts";
import { type Manifest, parseManifests } from "./kubernetes-schemas.ts";

/** The rendered YAML, or helm's error text. */
export function templateChart(
  dir: string,
  values: Record<string, unknown> = {},
  release = "orders",
  apiVersions: string[] = [],
): Promise<{ ok: true; yaml: string } | { ok: false; error: string }> {
  return helmTemplate(values, {
    chart: dir,
    release,
    namespace: "shop",
    apiVersions,
    withoutBaseValues: true,
  });
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
