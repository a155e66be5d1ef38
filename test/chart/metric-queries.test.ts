// The Grafana dashboard and the chart's alerts query metrics the controller really exports, with
// labels those metrics really carry (plus the ones Prometheus adds per target), so a renamed
// metric or label breaks here rather than on an empty panel or a silent alert.
import { readFile } from "node:fs/promises";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { kubeTools, renderChart, repoRoot } from "../support/kube/chart.ts";
import { skipBecause } from "../support/skip.ts";
import { exportedMetrics as exported, TARGET_LABELS } from "./exported-metrics.ts";

const tools = await kubeTools();

/** Problems of one PromQL expression: unknown pglease metrics, labels the metric does not have. */
function queryProblems(expr: string, metrics: Map<string, string[]>): string[] {
  const problems: string[] = [];
  const names = [...expr.matchAll(/\b(pglease_[a-z_]+|leader_election_master_status)\b(\{([^}]*)\})?/g)];
  if (names.length === 0) problems.push(`${expr}: queries no pglease metric`);
  // Labels a query groups by: of one of its metrics, or of the target.
  const own = names.flatMap(([, name = ""]) => metrics.get(name) ?? []);
  for (const [, list = ""] of expr.matchAll(/\b(?:by|without)\s*\(([^)]*)\)/g)) {
    for (const label of list.split(",").map((l) => l.trim())) {
      if (label && !own.includes(label) && !TARGET_LABELS.includes(label)) {
        problems.push(`by (${label}): no metric of the query has that label`);
      }
    }
  }
  for (const [, name = "", , selector = ""] of names) {
    const labels = metrics.get(name);
    if (labels === undefined) {
      problems.push(`${name}: not exported by the controller`);
      continue;
    }
    for (const [, label = ""] of selector.matchAll(/([a-zA-Z_]+)\s*(?:=~|!~|!=|=)/g)) {
      if (!labels.includes(label) && !TARGET_LABELS.includes(label)) {
        problems.push(`${name}{${label}}: no such label (it has ${labels.join(", ")})`);
      }
    }
  }
  return problems;
}

describe("metric queries", () => {
  it("the Grafana dashboard queries exported metrics by their own labels", async () => {
    const dashboard = JSON.parse(
      await readFile(join(repoRoot, "deploy", "grafana", "pglease-dashboard.json"), "utf8"),
    ) as {
      panels: { title: string; targets: { expr: string }[]; fieldConfig: { defaults: { unit?: string } } }[];
    };
    // Every panel says what its numbers are (seconds, a count, a plain number like a fence).
    expect(dashboard.panels.filter((p) => !p.fieldConfig.defaults.unit).map((p) => p.title)).toEqual([]);
    const metrics = exported();
    const exprs = dashboard.panels.flatMap((p) => p.targets.map((t) => t.expr));
    expect(exprs.length).toBeGreaterThan(10);
    expect(exprs.flatMap((e) => queryProblems(e, metrics))).toEqual([]);
    // Our own names, for one job in one namespace: another operator's leases never mix in.
    for (const expr of exprs) {
      expect(expr, expr).not.toContain("leader_election_master_status");
      expect(expr, expr).toMatch(/\{[^}]*namespace=~"\$namespace"[^}]*job=~"\$job"/);
    }
    for (const wanted of [
      "pglease_leader",
      "pglease_fence",
      "pglease_transitions_total",
      "pglease_statement_duration_seconds_bucket",
      "pglease_lease_remaining_seconds",
      "pglease_renew_lateness_seconds_bucket",
      "pglease_deadline_margin_seconds_bucket",
      "pglease_db_clock_offset_seconds",
      "pglease_db_clock_steps_total",
      "pglease_release_notices_total",
      "pglease_pod_patch_errors_total",
      "pglease_publish_lag_seconds_bucket",
      "pglease_renew_failures_total",
      "pglease_application_ready",
      "pglease_health_handovers_total",
    ]) {
      expect(
        exprs.some((e) => e.includes(wanted)),
        wanted,
      ).toBe(true);
    }
  });

  it("catches a metric or a label the controller does not export", () => {
    const metrics = exported();
    expect(queryProblems('pglease_is_leader{lease="a"}', metrics)).toEqual([
      "pglease_is_leader: not exported by the controller",
    ]);
    expect(queryProblems('leader_election_master_status{lease="a"}', metrics)).toEqual([
      "leader_election_master_status{lease}: no such label (it has name)",
    ]);
    expect(queryProblems("sum by (target, status) (pglease_pod_patch_errors_total)", metrics)).toEqual([
      "by (status): no metric of the query has that label",
    ]);
  });

  // Skipped, like the chart tests, only where helm cannot be fetched outside CI.
  it.skipIf(skipBecause("chart alert queries", process.env.CI !== "true" && !tools.ok && tools.reason))(
    "the chart's alerts query exported metrics by their own labels",
    async () => {
      const manifests = await renderChart({ metrics: { prometheusRule: { enabled: true } } });
      const rule = manifests.find((m) => m.kind === "PrometheusRule") as unknown as {
        spec: { groups: { rules: { expr: string }[] }[] };
      };
      const exprs = rule.spec.groups.flatMap((g) => g.rules.map((r) => r.expr));
      expect(exprs).toHaveLength(11);
      // One alert reads Prometheus's own `up` of the sidecars' targets; the others read ours.
      const [up, ...ours] = [...exprs].sort(
        (a, b) => Number(b.startsWith("up{")) - Number(a.startsWith("up{")),
      );
      expect(up).toBe('up{namespace="pglease-test", job="pglease-pods"} == 0');
      expect(ours.flatMap((e) => queryProblems(e, exported()))).toEqual([]);
    },
  );
});
