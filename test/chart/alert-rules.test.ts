// The chart's alerts, run: `promtool test rules` on the rules `helm template` renders and the
// test files in test/chart/alerts/ (their README says how they are laid out). Every alert needs a
// test that fires it and one where it must not fire, and the test series must be ones the
// sidecar really exports, or a test could pass on series no Prometheus will ever hold.
import { execFile } from "node:child_process";
import { copyFile, mkdtemp, readdir, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { afterAll, describe, expect, it } from "vitest";
import { parse, stringify } from "yaml";
import { MARGIN_BUCKETS } from "../../src/observability/lease-timing-metrics.ts";
import { type ChartValues, chartDir, kubeTools, renderChart, repoRoot } from "../support/kube/chart.ts";
import { skipBecause } from "../support/skip.ts";
import { exportedMetrics, TARGET_LABELS } from "./exported-metrics.ts";

const run = promisify(execFile);
const ALERTS_DIR = join(repoRoot, "test", "chart", "alerts");

// Debian's `prometheus` package ships promtool; .ci/run installs it. Skipped only outside CI.
const promtool = await run("promtool", ["--version"]).then(
  () => null,
  () => "promtool is not installed (apt-get install prometheus)",
);
const tools = await kubeTools();
const missing = promtool ?? (tools.ok ? null : tools.reason);

interface Rule {
  alert: string;
  expr: string;
}
interface UnitTestFile {
  tests: {
    name: string;
    input_series: { series: string; values: string }[];
    alert_rule_test?: { alertname: string; exp_alerts: unknown[] }[];
  }[];
}

/** The PrometheusRule's groups, as a Prometheus rule file, for the release the tests assume. */
async function renderRules(values: ChartValues = {}): Promise<{ groups: { rules: Rule[] }[] }> {
  const manifests = await renderChart(
    {
      lease: { name: "orders" },
      metrics: { prometheusRule: { enabled: true, runbookUrl: "https://runbook.example/pglease" } },
      ...values,
    },
    { release: "web", namespace: "shop" },
  );
  const rule = manifests.find((m) => m.kind === "PrometheusRule") as unknown as {
    spec: { groups: { rules: Rule[] }[] };
  };
  return rule.spec;
}

const testFiles = (await readdir(ALERTS_DIR)).filter((f) => f.endsWith(".yaml")).sort();
const work = await mkdtemp(join(tmpdir(), "pglease-alerts-"));
afterAll(() => rm(work, { recursive: true, force: true }));

describe.skipIf(skipBecause("alert rules", process.env.CI !== "true" && missing))(
  "the chart's alerts",
  () => {
    it("pass promtool's checks and every unit test in test/chart/alerts", async () => {
      await writeFile(join(work, "rules.yaml"), stringify(await renderRules()));
      for (const file of testFiles) await copyFile(join(ALERTS_DIR, file), join(work, file));
      await run("promtool", ["check", "rules", "rules.yaml"], { cwd: work });
      const result = await run("promtool", ["test", "rules", ...testFiles], { cwd: work }).then(
        () => "passed",
        (error: { stdout?: string; stderr?: string }) => `${error.stdout ?? ""}${error.stderr ?? ""}`,
      );
      expect(result).toBe("passed");
    });

    it("every alert has a test that fires it and one where it must not fire", async () => {
      const alerts = (await renderRules()).groups.flatMap((g) => g.rules.map((r) => r.alert));
      expect(alerts.length).toBe(11);
      const cases = await Promise.all(
        testFiles.map(async (f) => parse(await readFile(join(ALERTS_DIR, f), "utf8")) as UnitTestFile),
      );
      const checks = cases.flatMap((c) => c.tests.flatMap((t) => t.alert_rule_test ?? []));
      const missingTests = alerts.flatMap((alert) => {
        const mine = checks.filter((c) => c.alertname === alert);
        return [
          ...(mine.some((c) => c.exp_alerts.length > 0) ? [] : [`${alert}: no test fires it`]),
          ...(mine.some((c) => c.exp_alerts.length === 0)
            ? []
            : [`${alert}: no test where it must not fire`]),
        ];
      });
      expect(missingTests).toEqual([]);
      // A routine rolling update with graceful handovers fires nothing, whatever the alert.
      const routine = cases[testFiles.indexOf("routine.yaml")]?.tests[0]?.alert_rule_test ?? [];
      expect(new Set(routine.filter((c) => c.exp_alerts.length === 0).map((c) => c.alertname))).toEqual(
        new Set(alerts),
      );
    });

    it("the test series are the sidecar's metrics with their own labels, plus the target's", async () => {
      const metrics = exportedMetrics();
      metrics.set("up", []);
      const problems: string[] = [];
      for (const file of testFiles) {
        const cases = parse(await readFile(join(ALERTS_DIR, file), "utf8")) as UnitTestFile;
        for (const { series } of cases.tests.flatMap((t) => t.input_series)) {
          const [, name = "", labels = ""] = /^([a-z_]+)\{(.*)\}$/.exec(series) ?? [];
          const own = metrics.get(name);
          if (own === undefined) {
            problems.push(`${file}: ${name || series} is not exported by the sidecar`);
            continue;
          }
          const names = [...labels.matchAll(/([a-z_]+)="[^"]*"/g)].map((m) => m[1] ?? "");
          for (const label of names) {
            if (!own.includes(label) && !TARGET_LABELS.includes(label)) {
              problems.push(`${file}: ${name}{${label}} is not a label of it (it has ${own.join(", ")})`);
            }
          }
          for (const label of [...own.filter((l) => l !== "le"), "namespace", "job", "pod", "instance"]) {
            if (!names.includes(label)) problems.push(`${file}: ${series} lacks the label ${label}`);
          }
        }
      }
      expect(problems).toEqual([]);
    });

    it("a renew is near the deadline under a fifth of its usual margin, whatever the lease duration", async () => {
      const le = async (lease: ChartValues) => {
        const rules = (await renderRules({ lease: { name: "orders", ...lease } })).groups.flatMap(
          (g) => g.rules,
        );
        const expr = rules.find((r) => r.alert === "PgleaseRenewNearDeadline")?.expr ?? "";
        return /le="([^"]+)"/.exec(expr)?.[1];
      };
      // Usual margin: duration - 2 x renewInterval (the safety margin is one renew interval).
      expect(await le({})).toBe("1"); // 15 s: 5 s usual, 1 s near
      expect(await le({ duration: "3s" })).toBe("0.1"); // 1 s usual: 200 ms, the bucket below it
      expect(await le({ duration: "60s" })).toBe("3"); // 20 s usual: 4 s
      expect(await le({ duration: "15s", renewInterval: "2s" })).toBe("2"); // 11 s usual: 2.2 s
    });

    it("the chart's bucket bounds are the sidecar's", async () => {
      const template = await readFile(join(chartDir, "templates", "prometheus-rule.yaml"), "utf8");
      const bounds = [...template.matchAll(/\(list (\d+) "([\d.]+)"\)/g)].map(([, ms, le]) => ({
        ms: Number(ms),
        le,
      }));
      // The smallest bound is the default, the others are chosen from the list.
      expect(["0.001", ...bounds.map((b) => b.le)]).toEqual(MARGIN_BUCKETS.map(String));
      for (const { ms, le } of bounds) expect(ms / 1000).toBe(Number(le));
    });

    it("reads the job the user's scrape configuration gives the sidecars", async () => {
      const rules = (
        await renderRules({ metrics: { prometheusRule: { enabled: true, job: "shop/web-pods" } } })
      ).groups.flatMap((g) => g.rules);
      for (const { alert, expr } of rules) {
        expect(expr, alert).toContain('job="shop/web-pods"');
        expect(expr, alert).not.toContain("web-pglease-pods");
      }
    });

    it("work without the chart's ServiceMonitor: on the job and at the interval of the user's scrape configuration", async () => {
      // A PodMonitor's job (<namespace>/<name>) scraping every 15 s; the chart's ServiceMonitor off.
      const values = {
        metrics: {
          serviceMonitor: { enabled: false },
          prometheusRule: {
            enabled: true,
            runbookUrl: "https://runbook.example/pglease",
            job: "shop/web-pods",
            scrapeInterval: "15s",
          },
        },
      };
      const rules = await renderRules(values);
      const fenceJump = rules.groups.flatMap((g) => g.rules).find((r) => r.alert === "PgleaseFenceJump");
      expect(fenceJump?.expr).toContain("[15m:15s]");
      const dir = await mkdtemp(join(work, "podmonitor-"));
      await writeFile(join(dir, "rules.yaml"), stringify(rules));
      const leader = (job: string) => ({
        series: `pglease_leader{namespace="shop",job="${job}",pod="web-pglease-a",instance="10.0.0.1:8484",lease="orders"}`,
        values: "1x20",
      });
      const noLeader = (exp_alerts: unknown[]) => [
        { eval_time: "4m", alertname: "PgleaseNoLeader", exp_alerts },
      ];
      const fired = {
        exp_labels: { severity: "critical", lease: "orders" },
        exp_annotations: {
          summary: "No pod leads lease orders in shop",
          description:
            "No pod of web-pglease has reported leadership of lease orders for 30s. Who holds it: kubectl exec -n shop deploy/web-pglease -c pglease -- pglease status orders; what changed: kubectl exec -n shop deploy/web-pglease -c pglease -- pglease history orders --since 1h; the sidecars: kubectl logs -n shop -l app.kubernetes.io/instance=web -c pglease",
          runbook_url: "https://runbook.example/pglease#pgleasenoleader",
        },
      };
      await writeFile(
        join(dir, "podmonitor.yaml"),
        stringify({
          rule_files: ["rules.yaml"],
          evaluation_interval: "15s",
          tests: [
            // The leader reported under the configured job: it is seen.
            { interval: "15s", input_series: [leader("shop/web-pods")], alert_rule_test: noLeader([]) },
            // Only under the ServiceMonitor's job, which no longer scrapes here: not these rules' pods.
            {
              interval: "15s",
              input_series: [leader("web-pglease-pods")],
              alert_rule_test: noLeader([fired]),
            },
          ],
        }),
      );
      const result = await run("promtool", ["test", "rules", "podmonitor.yaml"], { cwd: dir }).then(
        () => "passed",
        (error: { stdout?: string; stderr?: string }) => `${error.stdout ?? ""}${error.stderr ?? ""}`,
      );
      expect(result).toBe("passed");
    });

    it("leaves out the health gate's alerts when the gate is off", async () => {
      const rules = (await renderRules({ health: { gate: "off" } })).groups.flatMap((g) => g.rules);
      expect(rules.map((r) => r.alert)).not.toContain("PgleaseLeaderUnready");
      expect(rules.map((r) => r.alert)).not.toContain("PgleaseHealthHandovers");
      expect(rules).toHaveLength(9);
    });
  },
);
