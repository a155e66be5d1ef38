// The pglease-sidecar library chart, through the example chart that uses it
// (deploy/examples/existing-chart): it renders the same sidecar, volumes and permissions as
// charts/pglease (which is built on it), its defaults are the chart's, its objects are valid
// Kubernetes, and it refuses settings that cannot work with a message naming them.
import { readFile } from "node:fs/promises";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { parse } from "yaml";
import { ADMISSION_POLICY_API, isHelmHook, kubeTools, renderChart, repoRoot } from "../support/kube/chart.ts";
import { skipBecause } from "../support/skip.ts";
import { renderChartDir, templateChart } from "./helm.ts";
import { type Manifest, schemaProblems } from "./kubernetes-schemas.ts";
import { unknownFieldProblems } from "./unknown-fields.ts";

const tools = await kubeTools();
const skip = skipBecause("library chart tests", !tools.ok && tools.reason);

const library = join(repoRoot, "charts", "pglease-sidecar");
const example = join(repoRoot, "deploy", "examples", "existing-chart");

interface Container {
  name: string;
  env?: { name: string }[];
}
interface PodSpec {
  serviceAccountName: string;
  automountServiceAccountToken: boolean;
  terminationGracePeriodSeconds: number;
  initContainers: Container[];
  containers: Container[];
  volumes: { name: string }[];
}

function podOf(manifests: Manifest[]): PodSpec {
  const [workload] = manifests.filter((m) => m.kind === "Deployment");
  return (workload as unknown as { spec: { template: { spec: PodSpec } } }).spec.template.spec;
}

function rulesOf(manifests: Manifest[]): unknown {
  return (manifests.find((m) => m.kind === "Role" && !isHelmHook(m)) as unknown as { rules: unknown }).rules;
}

/** The library's defaults: the YAML body of its "pglease-sidecar.defaults" template. */
async function libraryDefaults(): Promise<Record<string, Record<string, unknown>>> {
  const text = await readFile(join(library, "templates", "_config.tpl"), "utf8");
  const body = /\{\{- define "pglease-sidecar\.defaults" -\}\}\n([\s\S]*?)\{\{- end \}\}/.exec(text)?.[1];
  expect(body, "the defaults template").toBeDefined();
  return parse(body as string);
}

describe.skipIf(skip)("the pglease-sidecar library chart", () => {
  it("renders the sidecar, its volumes and permissions exactly as charts/pglease does", async () => {
    const values = parse(await readFile(join(example, "values.yaml"), "utf8")).pglease;
    const fromExample = await renderChartDir(example);
    const fromChart = await renderChart(
      {
        fullnameOverride: values.name,
        lease: values.lease,
        database: values.database,
        publish: values.publish,
      },
      { release: "orders", namespace: "shop" },
    );
    const [mine, theirs] = [podOf(fromExample), podOf(fromChart)];
    expect(mine.initContainers).toEqual(theirs.initContainers);
    const ours = (pod: PodSpec) => pod.volumes.filter((v) => v.name.startsWith("pglease-"));
    expect(ours(mine)).toEqual(ours(theirs));
    expect(ours(mine).map((v) => v.name)).toEqual(["pglease-tmp", "pglease-api-access", "pglease-podinfo"]);
    for (const key of [
      "serviceAccountName",
      "automountServiceAccountToken",
      "terminationGracePeriodSeconds",
    ]) {
      expect(mine[key as keyof PodSpec], key).toEqual(theirs[key as keyof PodSpec]);
    }
    const leaderEnv = (pod: PodSpec) => pod.containers[0]?.env?.filter((e) => e.name.startsWith("LEADER_"));
    expect(leaderEnv(mine)).toEqual(leaderEnv(theirs));
    expect(rulesOf(fromExample)).toEqual(rulesOf(fromChart));
  });

  it("has charts/pglease's values as its defaults", async () => {
    const defaults = await libraryDefaults();
    const chartValues = parse(await readFile(join(repoRoot, "charts", "pglease", "values.yaml"), "utf8"));
    const chartYaml = parse(await readFile(join(library, "Chart.yaml"), "utf8"));
    for (const key of ["lease", "publish", "podInfo", "serviceAccount", "rbac"]) {
      expect(defaults[key], key).toEqual(chartValues[key]);
    }
    const { url: _trialOnly, existingSecret: _required, ...database } = chartValues.database;
    expect(defaults.database).toEqual({ ...database, existingSecret: "" });
    const { image: chartImage, ...sidecar } = chartValues.sidecar;
    const { image, ...librarySidecar } = defaults.sidecar as { image: Record<string, string> };
    expect(librarySidecar).toEqual(sidecar);
    expect(image).toEqual({ ...chartImage, tag: chartYaml.appVersion });
    expect(defaults.app).toEqual({
      automountServiceAccountToken: chartValues.app.automountServiceAccountToken,
    });
    expect(defaults.terminationGracePeriodSeconds).toBe(chartValues.workload.terminationGracePeriodSeconds);
  });

  it("documents every setting in its README, and only those", async () => {
    const readme = await readFile(join(library, "README.md"), "utf8");
    const documented = [...readme.matchAll(/^\|\s*`([a-zA-Z.]+)`\s*\|/gm)].map(([, key]) => key as string);
    const leaves = (value: unknown, prefix: string): string[] =>
      value !== null && typeof value === "object" && !Array.isArray(value) && Object.keys(value).length > 0
        ? Object.entries(value).flatMap(([k, v]) => leaves(v, prefix ? `${prefix}.${k}` : k))
        : [prefix];
    const settings = leaves(await libraryDefaults(), "");
    // A documented key covers the settings under it (sidecar.resources covers its requests).
    const covered = (setting: string) => documented.some((k) => setting === k || setting.startsWith(`${k}.`));
    expect(settings.filter((setting) => !covered(setting))).toEqual([]);
    expect(
      documented.filter((k) => !settings.some((setting) => setting === k || setting.startsWith(`${k}.`))),
    ).toEqual([]);
  });

  it("renders valid Kubernetes objects in the example chart", async () => {
    const manifests = await renderChartDir(example);
    expect(manifests.map((m) => m.kind).sort()).toEqual([
      "Deployment",
      "PodDisruptionBudget",
      "Role",
      "RoleBinding",
      "Service",
      "ServiceAccount",
    ]);
    expect(manifests.flatMap(schemaProblems)).toEqual([]);
    expect(await unknownFieldProblems(manifests)).toEqual([]);
  });

  it("has charts/pglease's PodDisruptionBudget, over the Deployment's pods, whatever the release's name", async () => {
    type Budget = { spec: { selector: { matchLabels: Record<string, string> } } & Record<string, unknown> };
    const budgetOf = (manifests: Manifest[]) =>
      manifests.find((m) => m.kind === "PodDisruptionBudget") as unknown as Budget;
    const manifests = await renderChartDir(example, {}, "shop-eu");
    const { selector, ...budget } = budgetOf(manifests).spec;
    const { selector: _chartSelector, ...chartBudget } = budgetOf(
      await renderChart({}, { release: "shop-eu", namespace: "shop" }),
    ).spec;
    expect(budget).toEqual(chartBudget);
    const deployment = manifests.find((m) => m.kind === "Deployment") as unknown as {
      spec: { selector: { matchLabels: Record<string, string> } };
    };
    expect(selector.matchLabels).toEqual(deployment.spec.selector.matchLabels);
    expect(selector.matchLabels["app.kubernetes.io/instance"]).toBe("shop-eu");
  });

  // A release named 1234 rendered `app.kubernetes.io/instance: 1234`, a YAML integer the API
  // server refuses where a label's value (a string) goes; so did a Deployment's name.
  it("renders the release's name as a string wherever it goes, a name of digits too", async () => {
    const rendered = [
      ...(await renderChartDir(example, {}, "1234", [ADMISSION_POLICY_API])),
      ...(await renderChart({}, { release: "1234", namespace: "shop", apiVersions: [ADMISSION_POLICY_API] })),
    ];
    const notStrings = rendered.flatMap((m) => labelValuesNotStrings(m, `${m.kind}`));
    expect(notStrings).toEqual([]);
    const deployment = rendered.find((m) => m.kind === "Deployment") as unknown as {
      metadata: { name: unknown; labels: Record<string, unknown> };
    };
    expect(deployment.metadata.labels["app.kubernetes.io/instance"]).toBe("1234");
    expect(deployment.metadata.name).toBe("1234");
  });

  // Rendered into the policy's CEL as optional.of("1.2345678e+07"): no pod carries that label.
  it.each<[string, unknown, RegExp]>([
    [
      "a number",
      12345678,
      /admissionPolicy\.podLabels\.version: 12345678 is a number, .*quote it: version: '12345678'/,
    ],
    ["a boolean", true, /admissionPolicy\.podLabels\.version: true is a bool, .*quote it: version: 'true'/],
  ])("refuses a pod label's value that is %s, naming the label and the fix", async (_, value, message) => {
    const rendered = await templateChart(
      example,
      { pglease: { admissionPolicy: { podLabels: { version: value } } } },
      "orders",
      [ADMISSION_POLICY_API],
    );
    expect(rendered.ok ? "" : rendered.error).toMatch(message);
  });

  // Under another release name than the example's `orders`, with the names of the release in its
  // values, the admission policy refused every patch of the sidecar (in a real cluster: no pod
  // ever Ready, the sidecar logging "missing permission: patch pods", as it then took any 403 for
  // RBAC's; now "patch pods refused by admission", test/kube/publisher-rbac.test.ts).
  it("names the installed release's pods in its peer selector and admission policy, whatever the release's name", async () => {
    const manifests = await renderChartDir(example, {}, "shop-eu", [ADMISSION_POLICY_API]);
    const deployment = manifests.find((m) => m.kind === "Deployment") as unknown as {
      spec: { selector: { matchLabels: Record<string, string> } };
    };
    const selector = deployment.spec.selector.matchLabels;
    expect(selector["app.kubernetes.io/instance"]).toBe("shop-eu");
    const peerSelector = podOf(manifests).initContainers[0]?.env?.find(
      (e) => e.name === "PGLEASE_PEER_SELECTOR",
    ) as { value?: string } | undefined;
    expect(peerSelector?.value).toBe(
      Object.entries(selector)
        .map(([key, value]) => `${key}=${value}`)
        .join(","),
    );
    const policy = manifests.find((m) => m.kind === "ValidatingAdmissionPolicy") as unknown as {
      spec: { validations: { expression: string }[] };
    };
    const required = [
      ...(policy.spec.validations[0]?.expression ?? "").matchAll(
        /oldLabels\[\?"([^"]+)"\] == optional\.of\("([^"]*)"\)/g,
      ),
    ].map((m) => [m[1], m[2]]);
    expect(Object.fromEntries(required)).toEqual(selector);
  });

  it.each<[string, Record<string, unknown>, RegExp]>([
    ["no name", { name: "" }, /pglease-sidecar: name "" must be a DNS label/],
    ["no database Secret", { database: { existingSecret: "" } }, /set database\.existingSecret/],
    [
      "a history age without a unit",
      { history: { maxAge: "30" } },
      /history\.maxAge: "30" is not a duration: write a number and a unit, or several as Go does/,
    ],
    [
      "no history kept",
      { history: { maxRowsPerKey: 0 } },
      /history\.maxRowsPerKey 0 must be a whole number from 1 to 10000000/,
    ],
    [
      "a grace period past the termination grace period",
      { lease: { gracePeriod: "30s" } },
      /lease\.gracePeriod \(30s\) must be shorter than terminationGracePeriodSeconds \(30 s\)/,
    ],
    [
      "a malformed duration",
      { lease: { duration: "15 seconds" } },
      /lease\.duration: "15 seconds" is not a duration/,
    ],
    [
      "a startup probe shorter than the start timeout",
      { sidecar: { startupProbe: { periodSeconds: 5, failureThreshold: 6 } } },
      /sidecar\.startupProbe allows 30000 ms/,
    ],
  ])("refuses %s with a message naming the setting", async (_, pglease, message) => {
    const rendered = await templateChart(example, { pglease });
    expect(rendered.ok ? "" : rendered.error).toMatch(message);
  });

  it("takes durations as Go writes them, compound and decimal, as the sidecar does", async () => {
    const rendered = await templateChart(example, {
      pglease: {
        lease: { duration: "1m30s", retryInterval: "1.5s", gracePeriod: "0.25m" },
        sidecar: { startTimeout: "1h" },
        history: { maxAge: "1d12h" },
      },
    });
    expect(rendered.ok ? "" : rendered.error).toBe("");
    // 1.5m is 90 s, past the 30 s termination grace period: the fraction counts.
    const late = await templateChart(example, { pglease: { lease: { gracePeriod: "1.5m" } } });
    expect(late.ok ? "" : late.error).toMatch(
      /lease\.gracePeriod \(1\.5m\) must be shorter than terminationGracePeriodSeconds/,
    );
  });

  it("lets a false override a true default (no pod-info files, no RBAC objects)", async () => {
    const manifests = await renderChartDir(example, {
      pglease: { podInfo: { enabled: false }, serviceAccount: { create: false }, rbac: { create: false } },
    });
    expect(manifests.map((m) => m.kind).sort()).toEqual(["Deployment", "PodDisruptionBudget", "Service"]);
    expect(podOf(manifests).volumes.map((v) => v.name)).not.toContain("pglease-podinfo");
  });
});

/**
 * Where a label's value (metadata.labels, a selector's matchLabels, a Service's selector) or an
 * object's name is not a string.
 */
function labelValuesNotStrings(node: unknown, path: string): string[] {
  if (typeof node !== "object" || node === null) return [];
  return Object.entries(node).flatMap(([key, value]) => {
    const at = `${path}.${key}`;
    const serviceSelector =
      key === "selector" &&
      typeof value === "object" &&
      value !== null &&
      !("matchLabels" in value) &&
      !("matchExpressions" in value);
    if (
      (key === "labels" || key === "matchLabels" || serviceSelector) &&
      typeof value === "object" &&
      value !== null
    ) {
      return Object.entries(value)
        .filter(([, v]) => typeof v !== "string")
        .map(([k, v]) => `${at}.${k}: ${JSON.stringify(v)}`);
    }
    if (key === "name" && path.endsWith("metadata") && typeof value !== "string")
      return [`${at}: ${JSON.stringify(value)}`];
    return labelValuesNotStrings(value, at);
  });
}
