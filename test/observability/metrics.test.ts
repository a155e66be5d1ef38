// The timing metrics of a real elector on a real PostgreSQL, on the test's clock: a renew sent on
// time and one sent late, and how much of the local deadline was left when each was answered.
import { expect, it } from "vitest";
import { ManualClock } from "../../src/election/clock.ts";
import { SidecarMetrics } from "../../src/observability/metrics.ts";
import { electorHarness, until } from "../support/elector-harness.ts";

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
