// What the chart refuses, and that what it renders for every CI value set (and the plain
// sidecar patch) is valid Kubernetes: schemas from kubernetes-models, unknown fields by type.
import { execFile } from "node:child_process";
import { readdir, readFile } from "node:fs/promises";
import { join } from "node:path";
import { promisify } from "node:util";
import { describe, expect, it } from "vitest";
import { parse } from "yaml";
import { DURATION_PATTERN } from "../../src/config/values.ts";
import {
  type ChartValues,
  chartDir,
  helmTemplate,
  kubectlPath,
  kubeTools,
  renderChart,
  repoRoot,
} from "../support/kube/chart.ts";
import { skipBecause } from "../support/skip.ts";
import { type Manifest, parseManifests, schemaProblems } from "./kubernetes-schemas.ts";
import { unknownFieldProblems } from "./unknown-fields.ts";

const run = promisify(execFile);
const tools = await kubeTools();
const skip = skipBecause("chart value tests", !tools.ok && tools.reason);

it("the values schema checks every duration with the sidecar's own pattern (Go's syntax: 1h, 1m30s, 1.5s)", async () => {
  const schema = JSON.parse(await readFile(join(chartDir, "values.schema.json"), "utf8")) as unknown;
  const patterns: Array<[string, string]> = [];
  const walk = (node: unknown, path: string) => {
    if (typeof node !== "object" || node === null) return;
    for (const [key, child] of Object.entries(node)) {
      if (key === "pattern" && typeof child === "string" && /\(ms\|/.test(child))
        patterns.push([path, child]);
      // Prometheus's durations (rule windows, scrape intervals) are Prometheus's syntax, not the sidecar's.
      else if (`${path}/${key}` !== "/properties/metrics") walk(child, `${path}/${key}`);
    }
  };
  walk(schema, "");
  expect(patterns.length).toBeGreaterThanOrEqual(8);
  const optional = `^(${DURATION_PATTERN.slice(1, -1)})?$`;
  for (const [path, pattern] of patterns) expect([DURATION_PATTERN, optional], path).toContain(pattern);
});

describe.skipIf(skip)("charts/pglease values", () => {
  it.each<[string, ChartValues, RegExp]>([
    [
      "a malformed duration",
      { lease: { duration: "15 seconds" } },
      /\/lease\/duration.*does not match pattern/,
    ],
    [
      "a malformed label key",
      { publish: { roleLabel: "-bad/role" } },
      /\/publish\/roleLabel.*does not match pattern/,
    ],
    ["a misspelt key", { readinessGate: { enable: true } }, /\/readinessGate.*'enable' not allowed/],
    [
      "a history age without a unit",
      { history: { maxAge: "30" } },
      /\/history\/maxAge.*does not match pattern/,
    ],
    ["no history kept at all", { history: { maxRowsPerKey: 0 } }, /\/history\/maxRowsPerKey.*minimum/],
    [
      "an unknown workload kind",
      { workload: { kind: "DaemonSet" } },
      /\/workload\/kind.*Deployment.*StatefulSet/,
    ],
    ["a table name that is no identifier", { database: { table: "leases; drop" } }, /\/database\/table/],
    [
      "both an existing Secret and a URL",
      { database: { url: "postgres://a@b/c" } },
      /either database\.existingSecret or database\.url, not both/,
    ],
    [
      "a grace period past the termination grace period",
      { lease: { gracePeriod: "30s" } },
      /lease\.gracePeriod \(30s\) must be shorter than workload\.terminationGracePeriodSeconds \(30 s\)/,
    ],
    [
      "a renew interval as long as the lease",
      { lease: { renewInterval: "15s" } },
      /lease\.renewInterval \(15s\) must be shorter than lease\.duration/,
    ],
    [
      "the application named as the sidecar",
      { app: { name: "pglease" } },
      /app\.name "pglease" is the sidecar's container name \(sidecar\.name\)/,
    ],
    [
      "the role label among the pod labels",
      { workload: { podLabels: { "pglease.io/role": "leader" } } },
      /workload\.podLabels must not set the role label/,
    ],
    [
      "a readiness gate with a rolling update that would deadlock",
      { readinessGate: { enabled: true }, workload: { strategy: { rollingUpdate: { maxUnavailable: 1 } } } },
      /maxUnavailable is at least the replica count \(2/,
    ],
    [
      "a readiness gate with an ordered StatefulSet",
      {
        readinessGate: { enabled: true },
        workload: { kind: "StatefulSet", podManagementPolicy: "OrderedReady" },
      },
      /podManagementPolicy=Parallel/,
    ],
    [
      "a readiness gate with a StatefulSet rolling update",
      {
        readinessGate: { enabled: true },
        workload: { kind: "StatefulSet", updateStrategy: { type: "RollingUpdate" } },
      },
      /updateStrategy\.type=OnDelete/,
    ],
  ])("refuses %s with a message naming the value", async (_, values, message) => {
    const rendered = await helmTemplate(values);
    expect(rendered.ok).toBe(false);
    expect(rendered.ok ? "" : rendered.error).toMatch(message);
  });

  it("asks for the database when none is given", async () => {
    const rendered = await helmTemplate({}, { withoutBaseValues: true });
    expect(rendered.ok ? "" : rendered.error).toMatch(
      /set database\.existingSecret .* or, for a trial, database\.url/,
    );
  });

  it("refuses a native sidecar before Kubernetes 1.29 and renders a classic one there", async () => {
    const old = await helmTemplate({}, { kubeVersion: "1.28.0" });
    expect(old.ok ? "" : old.error).toMatch(
      /sidecar\.native needs Kubernetes 1\.29 or newer.*sidecar\.native=false/,
    );
    expect((await helmTemplate({ sidecar: { native: false } }, { kubeVersion: "1.28.0" })).ok).toBe(true);
  });

  it("renders valid Kubernetes objects for every value set in charts/pglease/ci", async () => {
    const files = (await readdir(join(chartDir, "ci"))).filter((f) => f.endsWith(".yaml")).sort();
    expect(files).toEqual([
      "defaults.yaml",
      "existing-secret.yaml",
      "monitoring.yaml",
      "network-policy.yaml",
      "readiness-gate.yaml",
      "statefulset.yaml",
    ]);
    const all: Manifest[] = [];
    for (const file of files) {
      const values = parse(await readFile(join(chartDir, "ci", file), "utf8")) as ChartValues;
      const manifests = await renderChart(values, { withoutBaseValues: true });
      expect(manifests.flatMap(schemaProblems), file).toEqual([]);
      all.push(...manifests);
    }
    expect(await unknownFieldProblems(all)).toEqual([]);
  });

  it("reports a misspelt field and a mistyped value in a rendered object", async () => {
    type Broken = Manifest & {
      spec: { replicas: unknown; template: { spec: { containers: Record<string, unknown>[] } } };
    };
    const [workload] = (await renderChart()).filter((m) => m.kind === "Deployment") as [Broken];
    workload.spec.replicas = "two";
    (workload.spec.template.spec.containers[0] as Record<string, unknown>).imagePullPolcy = "Always";
    expect(schemaProblems(workload)).toEqual([expect.stringMatching(/spec\/replicas must be integer/)]);
    const problems = await unknownFieldProblems([workload]);
    expect(problems).toEqual(
      expect.arrayContaining([
        expect.stringMatching(
          /Deployment\/pglease: .*'"imagePullPolcy"' does not exist in type 'IContainer'/,
        ),
        expect.stringMatching(/Deployment\/pglease: Type 'string' is not assignable to type 'number'/),
      ]),
    );
  });

  it("adds the sidecar to an existing Deployment with the plain patch in deploy/sidecar", async () => {
    const { stdout } = await run(
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
    const [patched] = parseManifests(stdout, "kubectl patch --local");
    expect(patched && schemaProblems(patched)).toEqual([]);
    expect(await unknownFieldProblems(patched ? [patched] : [])).toEqual([]);
    interface PatchedContainer {
      name: string;
      image?: string;
      env?: unknown[];
      volumeMounts?: unknown[];
    }
    const pod = (
      patched as unknown as {
        spec: {
          template: {
            spec: {
              serviceAccountName?: string;
              initContainers?: PatchedContainer[];
              containers: PatchedContainer[];
            };
          };
        };
      }
    ).spec.template.spec;
    expect(pod.serviceAccountName).toBe("pglease");
    expect(pod.initContainers).toEqual([
      expect.objectContaining({ name: "pglease", restartPolicy: "Always" }),
    ]);
    // The pod's uid, as the chart passes it: the publisher writes to this pod, never to a later
    // pod of the same name (a force-deleted StatefulSet pod's next one).
    expect(pod.initContainers?.[0]?.env).toContainEqual({
      name: "POD_UID",
      valueFrom: { fieldRef: { fieldPath: "metadata.uid" } },
    });
    const app = pod.containers.find((c) => c.name === "app");
    expect(app?.image).toBe("registry.example.com/my-app:1.0.0");
    expect(app?.env).toContainEqual({ name: "LOG_LEVEL", value: "info" });
    expect(app?.volumeMounts).toContainEqual({
      name: "pglease-podinfo",
      mountPath: "/etc/pglease",
      readOnly: true,
    });
  });
});
