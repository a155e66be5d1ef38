// The timing metrics of a real elector on a real PostgreSQL, on the test's clock: a renew sent on
// time and one sent late, and how much of the local deadline was left when each was answered.
import { expect, it } from "vitest";
import { SidecarMetrics } from "../../src/observability/metrics.ts";
import { electorHarness, until } from "../support/election/elector-harness.ts";
import { ManualClock } from "../support/manual-clock.ts";

const h = electorHarness();

async function histogram(metrics: SidecarMetrics, name: string) {
  const found = (await metrics.registry.getMetricsAsJSON()).find((m) => m.name === name);
  const values = (found?.values ?? []) as Array<{
    metricName?: string;
    value: number;
    labels: Record<string, unknown>;
  }>;
  return {
    sum: values.find((v) => v.metricName === `${name}_sum`)?.value,
    count: values.find((v) => v.metricName === `${name}_count`)?.value,
  };
}

it("renew lateness and deadline margin follow the elector's clock; transitions count by reason", async () => {
  const clock = new ManualClock();
  const metrics = new SidecarMetrics({ version: "1.2.3" }, ["timed"], () => clock.now());
  const a = h.elector(clock, { key: "timed", holder: "a" });
  metrics.watch(a.e);
  a.e.start();
  await until(clock, () => a.ticks.length === 1, "acquire at 0: deadline 10 s");
  clock.advance(5_000);
  await until(clock, () => a.ticks.length === 2, "renew on time at 5 s: deadline 15 s");
  // The loop is blocked 8 s: the renew due at 10 s goes out at 13 s, 2 s before the deadline.
  clock.stall(8_000);
  await until(clock, () => a.ticks.length === 3, "late renew");
  expect(a.outcomes()).toEqual(["acquired", "renewed", "renewed"]);
  expect(await histogram(metrics, "pglease_renew_lateness_seconds")).toEqual({ sum: 3, count: 2 });
  expect(await histogram(metrics, "pglease_deadline_margin_seconds")).toEqual({ sum: 7, count: 2 });
  const text = await metrics.registry.metrics();
  expect(text).toContain('pglease_transitions_total{lease="timed",direction="gained",reason="claim"} 1');
  expect(text).toContain('pglease_leader{lease="timed"} 1');
  metrics.observeNotice("timed");
  metrics.observeNotice("someone-elses-key");
  const after = await metrics.registry.metrics();
  expect(after).toContain('pglease_release_notices_total{lease="timed"} 1');
  expect(after).toContain('pglease_release_notices_total{lease="other"} 1');
});

// Prometheus's increase() counts nothing for a series whose first sample is already 1: a counter a
// rule reads with increase() must be exported at 0 before its first event, or the first clock
// step, renew failure or gain of a label set goes unseen by the alerts (test/chart/alerts/).
it("counters the alerts read start at 0 for every label set, before the first event", async () => {
  const clock = new ManualClock();
  const metrics = new SidecarMetrics({ version: "1.2.3" }, ["zeroed"], () => clock.now());
  const a = h.elector(clock, { key: "zeroed", holder: "a" });
  metrics.watch(a.e);
  const text = await metrics.registry.metrics();
  for (const direction of ["forward", "backward"]) {
    expect(text).toContain(`pglease_db_clock_steps_total{lease="zeroed",direction="${direction}"} 0`);
  }
  for (const kind of ["transient", "lost"]) {
    expect(text).toContain(`pglease_renew_failures_total{lease="zeroed",kind="${kind}"} 0`);
  }
  for (const reason of ["claim", "expiry-takeover", "new-term", "acquired"]) {
    expect(text).toContain(
      `pglease_transitions_total{lease="zeroed",direction="gained",reason="${reason}"} 0`,
    );
  }
  for (const reason of ["release", "resigned", "lost", "stepped-down"]) {
    expect(text).toContain(`pglease_transitions_total{lease="zeroed",direction="lost",reason="${reason}"} 0`);
  }
});

it("patch errors count by HTTP code; the application's readiness is absent until its first report", async () => {
  const metrics = new SidecarMetrics();
  metrics.observePatch({ target: "metadata", ok: false, durationMs: 3, status: 403 });
  metrics.observePatch({ target: "status", ok: false, durationMs: 3 });
  let view: { ready: boolean | null; handovers: number } = { ready: null, handovers: 0 };
  metrics.watchHealth("pod", () => view);
  const before = await metrics.registry.metrics();
  expect(before).toContain('pglease_pod_patch_errors_total{target="metadata",code="403"} 1');
  expect(before).toContain('pglease_pod_patch_errors_total{target="status",code="none"} 1');
  // Unknown is no sample, not a value a sum or an average would mix in.
  expect(before).not.toMatch(/^pglease_application_ready/m);
  expect(before).toMatch(/^pglease_health_handovers_total 0$/m);
  view = { ready: false, handovers: 1 };
  const unready = await metrics.registry.metrics();
  expect(unready).toMatch(/^pglease_application_ready\{gate="pod"\} 0$/m);
  expect(unready).toMatch(/^pglease_health_handovers_total 1$/m);
  view = { ready: true, handovers: 1 };
  expect(await metrics.registry.metrics()).toMatch(/^pglease_application_ready\{gate="pod"\} 1$/m);
});
