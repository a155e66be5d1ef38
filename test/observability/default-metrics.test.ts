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

it("counts the process's CPU time since its registration, user and system adding up to the total", async () => {
  const before = process.cpuUsage();
  const registry = new Registry();
  collectDefaultMetrics(registry);
  await registry.metrics();
  // 50 ms of CPU time (not wall time: a loaded host may not run this for all of it).
  while (process.cpuUsage(before).user < 50_000);
  await registry.metrics();
  const value = async (name: string) =>
    (await registry.getSingleMetric(name)?.get())?.values[0]?.value ?? Number.NaN;
  const user = await value("process_cpu_user_seconds_total");
  const system = await value("process_cpu_system_seconds_total");
  const total = await value("process_cpu_seconds_total");
  const spent = process.cpuUsage(before);
  expect(total).toBeCloseTo(user + system, 9);
  expect(user).toBeGreaterThanOrEqual(0.04);
  // Counted from the registration, not from the process's start.
  expect(total).toBeLessThanOrEqual((spent.user + spent.system) / 1e6);
});
