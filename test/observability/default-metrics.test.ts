// The sidecar's default metrics against prom-client's collectDefaultMetrics: pglease registers
// prom-client's default metrics from their own files, with its own process CPU counters
// (src/observability/prom-client.ts), and must expose the same metrics a scraper knew before.
import client from "prom-client";
import { expect, it } from "vitest";
import { collectDefaultMetrics, Registry } from "../../src/observability/prom-client.ts";

type Shape = { name: string; help: string; type: string };
const shapes = async (registry: client.Registry | Registry): Promise<Shape[]> =>
  (await registry.getMetricsAsJSON()).map(({ name, help, type }) => ({ name, help, type: String(type) }));

it("registers prom-client's default metrics: the same names, help and types, in its order", async () => {
  const theirs = new client.Registry();
  client.collectDefaultMetrics({ register: theirs });
  const ours = new Registry();
  collectDefaultMetrics(ours);
  expect(await shapes(ours)).toEqual(await shapes(theirs));
});

it("counts the process's CPU time since the last scrape, user and system adding up to the total", async () => {
  const registry = new Registry();
  collectDefaultMetrics(registry);
  const value = async (name: string) =>
    (await registry.getSingleMetric(name)?.get())?.values[0]?.value ?? Number.NaN;
  const before = process.cpuUsage();
  await registry.metrics();
  const end = Date.now() + 50;
  while (Date.now() < end); // CPU time to count
  await registry.metrics();
  const spent = process.cpuUsage(before);
  const [user, system, total] = await Promise.all(
    ["process_cpu_user_seconds_total", "process_cpu_system_seconds_total", "process_cpu_seconds_total"].map(
      value,
    ),
  );
  expect(total).toBeCloseTo(user + system, 9);
  expect(total).toBeGreaterThanOrEqual(0.04);
  // Counted from the registration, not the process's start: at most what this test spent since.
  expect(total).toBeLessThanOrEqual((spent.user + spent.system) / 1e6 + 0.01);
});
