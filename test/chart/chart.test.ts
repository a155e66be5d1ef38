// The chart's contract, asserted on what helm really renders: the sidecar's exact permissions,
// selectors that never hold the role label, the readiness gate only on request, no secret in
// plain env, restricted security everywhere, and the sidecar's settings.
import { Buffer } from "node:buffer";
import { execFile } from "node:child_process";
import { readFile } from "node:fs/promises";
import { join } from "node:path";
import { promisify } from "node:util";
import { describe, expect, it } from "vitest";
import { parse } from "yaml";
import { parseDuration } from "../../src/config/values.ts";
import {
  BASE_VALUES,
  type ChartValues,
  chartDir,
  helmPath,
  isHelmHook,
  kubeTools,
  renderChart,
  renderChartRole,
  repoRoot,
} from "../support/kube/chart.ts";
import { skipBecause } from "../support/skip.ts";
import { type Manifest, parseManifests } from "./kubernetes-schemas.ts";

const tools = await kubeTools();
const { appVersion } = parse(await readFile(join(chartDir, "Chart.yaml"), "utf8")) as { appVersion: string };
const skip = skipBecause("chart tests", !tools.ok && tools.reason);

// CI must run these: there a missing helm fails instead of skipping.
const notCi = skipBecause("helm fetched in CI", process.env.CI !== "true" && "runs only in CI (CI=true)");
it.skipIf(notCi)("fetches helm in CI", () => {
  expect(tools).toEqual({ ok: true });
});

interface Container {
  name: string;
  restartPolicy?: string;
  env?: { name: string; value?: string; valueFrom?: Record<string, unknown> }[];
  securityContext?: Record<string, unknown> & { capabilities?: { drop?: string[] } };
  livenessProbe?: { httpGet?: { path: string } };
  readinessProbe?: { httpGet?: { path: string } };
  startupProbe?: { failureThreshold?: number };
  volumeMounts?: { name: string; mountPath: string }[];
}
interface PodSpec {
  initContainers?: Container[];
  containers: Container[];
  readinessGates?: { conditionType: string }[];
  securityContext?: Record<string, unknown>;
  serviceAccountName?: string;
  terminationGracePeriodSeconds?: number;
  volumes?: { name: string; downwardAPI?: { items: { path: string; fieldRef: { fieldPath: string } }[] } }[];
}
interface Workload extends Manifest {
  spec: {
    selector: { matchLabels: Record<string, string> };
    strategy?: { type: string };
    updateStrategy?: { type: string };
    template: { metadata: { labels: Record<string, string> }; spec: PodSpec };
  };
}

const SIDECAR_RULES = [
  { apiGroups: [""], resources: ["pods"], verbs: ["get", "list", "patch", "watch"] },
  { apiGroups: [""], resources: ["pods/status"], verbs: ["patch"] },
  // Core v1 Events: what the publisher creates (CoreV1Api.createNamespacedEvent), not events.k8s.io.
  { apiGroups: [""], resources: ["events"], verbs: ["create"] },
];

function normalizedRules(rules: { apiGroups?: string[]; resources?: string[]; verbs: string[] }[] = []) {
  return rules.map((r) => ({
    apiGroups: [...(r.apiGroups ?? [])].sort(),
    resources: [...(r.resources ?? [])].sort(),
    verbs: [...r.verbs].sort(),
  }));
}

function workloadOf(manifests: Manifest[]): Workload {
  const found = manifests.filter((m) => m.kind === "Deployment" || m.kind === "StatefulSet");
  expect(found).toHaveLength(1);
  return found[0] as Workload;
}

function one(manifests: Manifest[], kind: string, hook = false): Manifest & { spec?: never } {
  const found = manifests.filter((m) => m.kind === kind && isHelmHook(m) === hook);
  expect(found, `one ${kind}`).toHaveLength(1);
  return found[0] as Manifest & { spec?: never };
}

function sidecarOf(pod: PodSpec): Container {
  const found = [...(pod.initContainers ?? []), ...pod.containers].filter((c) => c.name === "pglease");
  expect(found).toHaveLength(1);
  return found[0] as Container;
}

function envOf(container: Container): Map<string, string | undefined> {
  return new Map((container.env ?? []).map((e) => [e.name, e.value]));
}

describe.skipIf(skip)("charts/pglease", () => {
  it("grants the sidecar exactly pods get/list/watch/patch, pods/status patch and core events create", async () => {
    const role = await renderChartRole();
    expect(normalizedRules(role.rules)).toEqual(normalizedRules(SIDECAR_RULES));

    const manifests = await renderChart({ metrics: { serviceMonitor: { enabled: true } } });
    expect(manifests.filter((m) => m.kind.startsWith("Cluster"))).toEqual([]);
    const binding = one(manifests, "RoleBinding") as unknown as {
      roleRef: { kind: string; name: string };
      subjects: { kind: string; name: string }[];
    };
    expect(binding.roleRef).toMatchObject({ kind: "Role", name: role.metadata?.name });
    expect(binding.subjects).toEqual([
      expect.objectContaining({
        kind: "ServiceAccount",
        name: workloadOf(manifests).spec.template.spec.serviceAccountName,
      }),
    ]);
  });

  it("renders the same permissions as the plain manifests in deploy/sidecar", async () => {
    const plain = parseManifests(await readFile("deploy/sidecar/rbac.yaml", "utf8"), "rbac.yaml");
    const plainRole = plain.find((m) => m.kind === "Role") as unknown as { rules: typeof SIDECAR_RULES };
    expect(normalizedRules(plainRole.rules)).toEqual(normalizedRules((await renderChartRole()).rules));
  });

  it.each<[string, ChartValues]>([
    ["Deployment", {}],
    ["StatefulSet", { workload: { kind: "StatefulSet" } }],
    ["a custom role label", { publish: { roleLabel: "example.com/role" } }],
  ])("keeps the role label out of the %s selector and in the leader Service's", async (_, values) => {
    const manifests = await renderChart(values);
    const roleLabel =
      ((values.publish as { roleLabel?: string } | undefined)?.roleLabel as string) ?? "pglease.io/role";
    const workload = workloadOf(manifests);
    expect(Object.keys(workload.spec.selector.matchLabels)).not.toContain(roleLabel);
    expect(Object.keys(workload.spec.template.metadata.labels)).not.toContain(roleLabel);
    const services = manifests.filter((m) => m.kind === "Service") as unknown as {
      metadata: { name: string };
      spec: { selector: Record<string, string> };
    }[];
    const leader = services.find((s) => s.metadata.name.endsWith("-leader"));
    expect(leader?.spec.selector).toEqual({ ...workload.spec.selector.matchLabels, [roleLabel]: "leader" });
    expect(envOf(sidecarOf(workload.spec.template.spec)).get("PGLEASE_ROLE_LABEL")).toBe(roleLabel);
  });

  it("adds the leadership readiness gate only when enabled, with a rollout that cannot deadlock", async () => {
    const plain = workloadOf(await renderChart());
    expect(plain.spec.template.spec.readinessGates).toBeUndefined();
    expect(plain.spec.strategy).toBeUndefined();

    const gated = workloadOf(await renderChart({ readinessGate: { enabled: true } }));
    expect(gated.spec.template.spec.readinessGates).toEqual([{ conditionType: "pglease.io/leader" }]);
    expect(gated.spec.strategy).toEqual({ type: "Recreate" });

    const gatedSet = workloadOf(
      await renderChart({ readinessGate: { enabled: true }, workload: { kind: "StatefulSet" } }),
    );
    expect(gatedSet.spec.template.spec.readinessGates).toHaveLength(1);
    expect(gatedSet.spec.updateStrategy).toEqual({ type: "OnDelete" });

    const allAtOnce = {
      type: "RollingUpdate",
      rollingUpdate: { maxUnavailable: "100%", maxSurge: 0 },
    };
    const rolling = workloadOf(
      await renderChart({ readinessGate: { enabled: true }, workload: { strategy: allAtOnce } }),
    );
    expect(rolling.spec.strategy).toEqual(allAtOnce);
  });

  it("keeps the database URL out of plain env when given as a value", async () => {
    const url = "postgres://pglease:s3cret-pa55@db.example:5432/leases";
    const manifests = await renderChart({ database: { url } }, { withoutBaseValues: true });
    const text = JSON.stringify(manifests.filter((m) => m.kind !== "Secret"));
    expect(text).not.toContain("s3cret-pa55");
    const secret = one(manifests, "Secret") as unknown as {
      metadata: { name: string };
      data: Record<string, string>;
    };
    expect(Buffer.from(secret.data.DATABASE_URL ?? "", "base64").toString()).toBe(url);
    const sidecar = sidecarOf(workloadOf(manifests).spec.template.spec);
    expect(sidecar.env?.find((e) => e.name === "DATABASE_URL")).toEqual({
      name: "DATABASE_URL",
      valueFrom: { secretKeyRef: { name: secret.metadata.name, key: "DATABASE_URL" } },
    });
  });

  it.each<[string, ChartValues]>([
    ["defaults", {}],
    ["classic sidecar in a StatefulSet", { workload: { kind: "StatefulSet" }, sidecar: { native: false } }],
  ])("runs every container restricted (%s), the helm test pod included", async (_, values) => {
    const manifests = await renderChart(values);
    const pods = [
      workloadOf(manifests).spec.template.spec,
      (one(manifests, "Pod", true) as unknown as { spec: PodSpec }).spec,
    ];
    for (const pod of pods) {
      expect(pod.securityContext).toMatchObject({
        runAsNonRoot: true,
        seccompProfile: { type: "RuntimeDefault" },
      });
      for (const container of [...(pod.initContainers ?? []), ...pod.containers]) {
        expect(container.securityContext, container.name).toMatchObject({
          allowPrivilegeEscalation: false,
          readOnlyRootFilesystem: true,
          runAsNonRoot: true,
          capabilities: { drop: ["ALL"] },
          seccompProfile: { type: "RuntimeDefault" },
        });
      }
    }
  });

  it("runs pglease as a native sidecar by default and as a plain container on request", async () => {
    const native = workloadOf(await renderChart()).spec.template.spec;
    expect(native.initContainers?.find((c) => c.name === "pglease")?.restartPolicy).toBe("Always");
    expect(native.containers.map((c) => c.name)).toEqual(["app"]);

    const classic = workloadOf(await renderChart({ sidecar: { native: false } })).spec.template.spec;
    expect(classic.initContainers).toBeUndefined();
    expect(classic.containers.map((c) => c.name)).toEqual(["app", "pglease"]);
    expect(classic.containers[1]?.restartPolicy).toBeUndefined();
  });

  it("configures the sidecar through its PGLEASE_* variables, probes and pod identity", async () => {
    const values = {
      lease: { name: "billing", additional: ["billing-cleanup"], duration: "10s", gracePeriod: "8s" },
      workload: { terminationGracePeriodSeconds: 12 },
    };
    const workload = workloadOf(await renderChart(values));
    const pod = workload.spec.template.spec;
    const sidecar = sidecarOf(pod);
    const env = envOf(sidecar);
    expect(env.get("PGLEASE_LEASE")).toBe("billing,billing-cleanup");
    expect(env.get("PGLEASE_DURATION")).toBe("10s");
    expect(env.get("PGLEASE_GRACE_PERIOD")).toBe("8s");
    // The port only: the host is the sidecar's default listen address.
    expect(env.get("PGLEASE_HTTP_ADDR")).toBe(":8484");
    expect(env.get("PGLEASE_PEER_SELECTOR")).toBe(
      "app.kubernetes.io/instance=pglease,app.kubernetes.io/name=pglease",
    );
    expect(sidecar.env?.find((e) => e.name === "POD_NAME")?.valueFrom).toEqual({
      fieldRef: { fieldPath: "metadata.name" },
    });
    expect(sidecar.env?.find((e) => e.name === "POD_NAMESPACE")?.valueFrom).toEqual({
      fieldRef: { fieldPath: "metadata.namespace" },
    });
    // The publisher pins its patches to this uid: never a later pod of the same name.
    expect(sidecar.env?.find((e) => e.name === "POD_UID")?.valueFrom).toEqual({
      fieldRef: { fieldPath: "metadata.uid" },
    });
    expect(sidecar.livenessProbe?.httpGet?.path).toBe("/healthz");
    expect(sidecar.readinessProbe?.httpGet?.path).toBe("/readyz");
    expect(pod.terminationGracePeriodSeconds).toBe(12);
    // The CLI's own defaults, spelt out.
    expect(env.get("PGLEASE_HISTORY_MAX_AGE")).toBe("30d");
    expect(env.get("PGLEASE_HISTORY_MAX_ROWS")).toBe("1000");
  });

  it("takes durations as Go writes them, as the sidecar does, and derives the startup probe from them", async () => {
    const podWith = async (values: ChartValues) => workloadOf(await renderChart(values)).spec.template.spec;
    const compound = await podWith({
      lease: { duration: "1m30s", retryInterval: "1.5s", renewInterval: "30s" },
      sidecar: { startTimeout: "1m30s" },
      history: { maxAge: "1h" },
    });
    const env = envOf(sidecarOf(compound));
    expect(env.get("PGLEASE_DURATION")).toBe("1m30s");
    expect(env.get("PGLEASE_HISTORY_MAX_AGE")).toBe("1h");
    for (const name of ["PGLEASE_DURATION", "PGLEASE_RETRY_INTERVAL", "PGLEASE_START_TIMEOUT"]) {
      expect(parseDuration(env.get(name) ?? ""), name).toHaveProperty("value");
    }
    const plain = await podWith({ sidecar: { startTimeout: "90s" } });
    expect(sidecarOf(compound).startupProbe?.failureThreshold).toBe(
      sidecarOf(plain).startupProbe?.failureThreshold,
    );
  });

  it("passes the history's retention to the sidecar", async () => {
    const env = envOf(
      sidecarOf(
        workloadOf(await renderChart({ history: { maxAge: "7d", maxRowsPerKey: 200 } })).spec.template.spec,
      ),
    );
    expect(env.get("PGLEASE_HISTORY_MAX_AGE")).toBe("7d");
    expect(env.get("PGLEASE_HISTORY_MAX_ROWS")).toBe("200");
  });

  it("projects the role label and fence annotation into the application container", async () => {
    const pod = workloadOf(
      await renderChart({ publish: { roleLabel: "example.com/role", fenceAnnotation: "example.com/fence" } }),
    ).spec.template.spec;
    const volume = pod.volumes?.find((v) => v.downwardAPI !== undefined);
    expect(volume?.downwardAPI?.items).toEqual(
      expect.arrayContaining([
        { path: "role", fieldRef: { fieldPath: "metadata.labels['example.com/role']" } },
        { path: "fence", fieldRef: { fieldPath: "metadata.annotations['example.com/fence']" } },
      ]),
    );
    const app = pod.containers.find((c) => c.name === "app");
    expect(app?.volumeMounts).toContainEqual(
      expect.objectContaining({ name: volume?.name, mountPath: "/etc/pglease" }),
    );
    expect(envOf(app as Container).get("LEADER_INFO_DIR")).toBe("/etc/pglease");
  });

  it("renders the ServiceMonitor and alerts only when enabled", async () => {
    const plain = await renderChart();
    expect(plain.filter((m) => m.apiVersion.startsWith("monitoring.coreos.com"))).toEqual([]);

    const monitored = await renderChart({
      lease: { name: "billing", duration: "20s" },
      metrics: { serviceMonitor: { enabled: true }, prometheusRule: { enabled: true } },
    });
    one(monitored, "ServiceMonitor");
    const rule = one(monitored, "PrometheusRule") as unknown as {
      spec: { groups: { rules: { alert: string; expr: string; for: string }[] }[] };
    };
    const rules = rule.spec.groups.flatMap((g) => g.rules);
    const perLease = [
      "PgleaseNoLeader",
      "PgleaseMultipleLeaders",
      "PgleaseFenceJump",
      "PgleaseFrequentLeaderChanges",
      "PgleaseRenewNearDeadline",
      "PgleaseRenewFailures",
      "PgleaseLeaderUnready",
    ];
    expect(rules.map((r) => r.alert)).toEqual([
      ...perLease,
      "PgleaseTargetDown",
      "PgleasePublishFailures",
      "PgleaseDatabaseClockStep",
      "PgleaseHealthHandovers",
    ]);
    expect(rules[0]).toMatchObject({ for: "40s" });
    // Our own metric, for this release's pods only: another operator's leader_election_master_status never counts.
    const selector = 'namespace="pglease-test", job="pglease-pods", lease="billing"';
    expect(rules[0]?.expr).toBe(`(sum(pglease_leader{${selector}}) or vector(0)) < 1`);
    expect(rules[1]?.expr).toBe(`sum(pglease_leader{${selector}}) > 1`);
    expect(rules[3]?.expr).toContain("pglease_transitions_total");
    for (const r of rules) {
      expect(r.expr).not.toContain("leader_election_master_status");
      const anchor = r.alert.toLowerCase();
      // The runbook of the version deployed: the tag the release workflow pushes for the appVersion.
      expect((r as unknown as { annotations: Record<string, string> }).annotations.runbook_url).toBe(
        `https://github.com/pglease/pglease/blob/v${appVersion}/docs/runbook.md#${anchor}`,
      );
    }
  });

  it("points every alert at the runbook copy the user names", async () => {
    const rule = one(
      await renderChart({
        metrics: {
          prometheusRule: { enabled: true, runbookUrl: "https://wiki.example.com/ops/pglease-runbook" },
        },
      }),
      "PrometheusRule",
    ) as unknown as {
      spec: { groups: { rules: { alert: string; annotations: Record<string, string> }[] }[] };
    };
    const urls = rule.spec.groups.flatMap((g) => g.rules).map((r) => [r.alert, r.annotations.runbook_url]);
    expect(urls.length).toBe(11);
    for (const [alert, url] of urls) {
      expect(url).toBe(`https://wiki.example.com/ops/pglease-runbook#${alert?.toLowerCase()}`);
    }
  });

  it("every alert's runbook anchor is a heading of docs/runbook.md that says what to check and what to do", async () => {
    const runbook = await readFile(join(repoRoot, "docs", "runbook.md"), "utf8");
    const sections = runbook.split(/^## /m).slice(1);
    const manifests = await renderChart({ metrics: { prometheusRule: { enabled: true } } });
    const rule = one(manifests, "PrometheusRule") as unknown as {
      spec: { groups: { rules: { alert: string }[] }[] };
    };
    for (const { alert } of rule.spec.groups.flatMap((g) => g.rules)) {
      const section = sections.find((s) => s.split("\n")[0]?.trim() === alert);
      expect(section, alert).toBeDefined();
      expect(section).toMatch(/\*\*Check\*\*/);
      expect(section).toMatch(/\*\*Do\*\*/);
    }
  });

  it("tells in NOTES.txt how to see who leads: role column, fence annotation, /status", async () => {
    const { stdout } = await promisify(execFile)(helmPath, [
      "install",
      "reports",
      chartDir,
      "--dry-run=client",
      "--namespace",
      "team-a",
      "--set",
      `database.existingSecret=${BASE_VALUES.database.existingSecret}`,
    ]);
    const notes = stdout.slice(stdout.indexOf("NOTES:"));
    expect(notes).toContain(
      "kubectl get pods -n team-a -l app.kubernetes.io/instance=reports,app.kubernetes.io/name=pglease -L pglease.io/role",
    );
    expect(notes).toContain("{.metadata.annotations.pglease\\.io/fence}");
    expect(notes).toContain("kubectl port-forward -n team-a pod/<pod> 8484:8484");
    expect(notes).toContain("curl -s http://127.0.0.1:8484/status");
    expect(notes).toContain("helm test -n team-a reports");
  });
});
