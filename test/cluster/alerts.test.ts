// The chart's alerts, evaluated by a real Prometheus against the sidecars of a release in the real
// cluster, with the user's own scrape configuration instead of the chart's ServiceMonitor (the
// rules rendered with `metrics.prometheusRule.job` naming it). A graceful handover (the leader pod
// deleted) must fire no alert; a lease nobody leads (the workload scaled to 0) must fire
// PgleaseNoLeader once it has lasted the rule's `for` (two lease durations by default).
import { setTimeout as sleep } from "node:timers/promises";
import { describe, expect, it } from "vitest";
import { renderChart } from "../support/kube/chart.ts";
import { skipBecause } from "../support/skip.ts";
import { type Prometheus, prometheusMissing, startPrometheus } from "./prometheus.ts";
import { releaseSuite } from "./release-suite.ts";
import { clusterSkipReason, describePods, pods, until } from "./session.ts";

const SUITE = "cluster alerts";
const clusterReason = await clusterSkipReason(SUITE);
const prometheusReason = clusterReason ? null : await prometheusMissing();
if (prometheusReason && process.env.PGLEASE_CLUSTER_REQUIRED === "1") {
  throw new Error(`[${SUITE}] PGLEASE_CLUSTER_REQUIRED=1 but ${prometheusReason}`);
}
const skip = clusterReason !== null || skipBecause(SUITE, prometheusReason);

const REPLICAS = 3;
/** The user's scrape job (not the chart's ServiceMonitor's `<fullname>-pods`). */
const JOB = "pglease-sidecars";
/** Scrape and evaluation interval: short, so the suite is short; the rules' own `for`s are the chart's. */
const INTERVAL_S = 1;
const INTERVAL = `${INTERVAL_S}s`;

describe.skipIf(skip)("the chart's alerts on a real Prometheus", () => {
  let prometheus: Prometheus;
  let rule: { spec: { groups: unknown[] } };
  let target: string;
  let started: number;
  const cluster = releaseSuite({
    suite: SUITE,
    replicas: REPLICAS,
    namespacePrefix: "alerts",
    async values(base, namespace) {
      const rules = {
        metrics: { prometheusRule: { enabled: true, job: JOB, scrapeInterval: INTERVAL } },
      };
      rule = (
        await renderChart({ ...base, ...rules }, { release: "orders", namespace, withoutBaseValues: true })
      ).find((m) => m.kind === "PrometheusRule") as unknown as { spec: { groups: unknown[] } };
      // The cluster has no prometheus-operator: the release goes in without the PrometheusRule, whose
      // rules the Prometheus below loads from a file.
      return base;
    },
    async ready() {
      const { namespace } = cluster.release;
      target = `namespace="${namespace}", job="${JOB}"`;
      prometheus = await startPrometheus({
        namespace,
        job: JOB,
        port: 8484,
        pods: async () =>
          (await pods(cluster.session, namespace, "app.kubernetes.io/component!=test")).flatMap((pod) =>
            pod.ip ? [{ name: pod.name, ip: pod.ip }] : [],
          ),
        intervalSeconds: INTERVAL_S,
        groups: rule.spec.groups,
      });
      started = Date.now() / 1000;
      await until(
        `${REPLICAS} sidecars scraped, one of them leading`,
        180_000,
        async () => ({
          up: (await prometheus.query(`sum(up{${target}})`))[0]?.value[1],
          leaders: (await prometheus.query(`sum(pglease_leader{${target}})`))[0]?.value[1],
        }),
        (seen) => seen.up === String(REPLICAS) && seen.leaders === "1",
      ).catch(async (error: Error) => {
        throw new Error(
          `${error.message}\n${await describePods(cluster.session, namespace, cluster.selector)}\n${await prometheus?.log()}`,
        );
      });
    },
    cleanUp: async () => prometheus?.stop(),
  });
  const { figures } = cluster;

  /** Every alert that was firing at some evaluation since `from` (seconds since the epoch). */
  const firedSince = async (from: number) => {
    const window = Math.ceil(Date.now() / 1000 - from);
    return (
      await prometheus.query(`count by (alertname) (max_over_time(ALERTS{alertstate="firing"}[${window}s]))`)
    ).map((s) => s.metric.alertname);
  };

  it("fires no alert across a graceful handover (the leader pod deleted)", async () => {
    // The leader as Prometheus sees it (its pod's label may come a moment after its gauge).
    const [leading] = await prometheus.query(`pglease_leader{${target}} == 1`);
    const leader = leading ? { name: leading.metric.pod } : undefined;
    expect(leader?.name).toBeDefined();
    const deleted = Date.now();
    await cluster.session.kubectl([
      "delete",
      "pod",
      "-n",
      cluster.release.namespace,
      leader?.name ?? "",
      "--wait=false",
    ]);
    // Prometheus sees another pod lead: the handover is over as far as any rule can tell.
    const [next] = await until(
      "Prometheus sees a new leader",
      120_000,
      () => prometheus.query(`pglease_leader{${target}} == 1`),
      (leaders) => leaders.length === 1 && leaders[0]?.metric.pod !== leader?.name,
    );
    figures.handoverSeenByPrometheusMs = Date.now() - deleted;
    // Rules without a `for` fire at the first evaluation that sees their condition: a few more
    // scrapes and evaluations after the new leader's first sample.
    await sleep(5_000);
    figures.pendingAfterHandover = (await prometheus.query("ALERTS")).map((s) => s.metric.alertname);
    expect(next?.metric.pod).not.toBe(leader?.name);
    expect(await firedSince(started)).toEqual([]);
  });

  it("fires PgleaseNoLeader when no pod leads (the workload scaled to 0)", async () => {
    const deployment = cluster.release.leaderService.replace(/-leader$/, "");
    const scaled = Date.now();
    await cluster.session.kubectl([
      "scale",
      "deployment",
      deployment,
      "-n",
      cluster.release.namespace,
      "--replicas=0",
    ]);
    const [alert] = await until(
      "PgleaseNoLeader firing",
      180_000,
      () => prometheus.query('ALERTS{alertname="PgleaseNoLeader", alertstate="firing"}'),
      (alerts) => alerts.length > 0,
      500,
    );
    const firedAt = Date.now() / 1000;
    figures.noLeaderFiredAfterScaleMs = Date.now() - scaled;
    // Not before the rule's `for` (two 15 s lease durations) after the last leader was seen.
    const leading = await prometheus.queryRange(
      `sum(pglease_leader{${target}}) >= 1`,
      scaled / 1000 - 5,
      firedAt,
      INTERVAL,
    );
    const lastLed = Math.max(...(leading[0]?.values ?? []).map(([t]) => t));
    figures.noLeaderFiredAfterLastLeaderSeenS = Math.round(firedAt - lastLed);
    expect(alert?.metric).toMatchObject({ alertname: "PgleaseNoLeader", severity: "critical" });
    expect(alert?.metric.lease).toBe(cluster.release.leaderService.replace(/-leader$/, ""));
    expect(firedAt - lastLed).toBeGreaterThanOrEqual(30 - 1);
    // Nothing else: a lease without a leader is exactly one alert.
    expect(new Set(await firedSince(started))).toEqual(new Set(["PgleaseNoLeader"]));
  });
});
