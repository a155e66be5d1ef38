// The parts of prom-client the sidecar uses, each taken from its own file. prom-client's index
// also loads its Pushgateway (node:https, node:zlib), its cluster aggregator and Summary with
// their dependencies, none of which pglease uses: 3 MiB of resident memory for the sidecar's
// whole life (issue 30, charts/pglease/README.md#memory). prom-client has no "exports" map, so
// these paths are its published files, pinned to 15.1.x in package.json (a minor release could
// add one); test/cli/module-graph.test.ts checks they stay loadable and that the index stays out.
// Types come from the package's own declarations.
import type * as PromClient from "prom-client";

const require = process.getBuiltinModule("node:module").createRequire(import.meta.url);

export const Registry: typeof PromClient.Registry = require("prom-client/lib/registry");
export type Registry = PromClient.Registry;
export const Counter: typeof PromClient.Counter = require("prom-client/lib/counter");
export type Counter<T extends string = string> = PromClient.Counter<T>;
export const Gauge: typeof PromClient.Gauge = require("prom-client/lib/gauge");
export type Gauge<T extends string = string> = PromClient.Gauge<T>;
export const Histogram: typeof PromClient.Histogram = require("prom-client/lib/histogram");
export type Histogram<T extends string = string> = PromClient.Histogram<T>;

/** One of prom-client's default metrics, as its lib/metrics/*.js exports it. */
type DefaultMetric = (register: Registry, config: { eventLoopMonitoringPrecision: number }) => void;

/**
 * prom-client's default metrics, as its collectDefaultMetrics registers them (lib/defaultMetrics.js
 * of 15.1.x, in its order), each from its own file but the process CPU counters, which are
 * pglease's own: prom-client's processCpuTotal loads @opentelemetry/api (0.4 MiB resident) for
 * exemplars pglease never enables. test/observability/default-metrics.test.ts holds the two
 * to the same names, help and types.
 */
export function collectDefaultMetrics(register: Registry): void {
  processCpuTotal(register);
  for (const name of [
    "processStartTime",
    "osMemoryHeap",
    "processOpenFileDescriptors",
    "processMaxFileDescriptors",
    "eventLoopLag",
    "processResources",
    "processHandles",
    "processRequests",
    "heapSizeAndUsed",
    "heapSpacesSizeAndUsed",
    "version",
    "gc",
  ]) {
    (require(`prom-client/lib/metrics/${name}`) as DefaultMetric)(register, {
      eventLoopMonitoringPrecision: 10,
    });
  }
}

/** prom-client's processCpuTotal without exemplars: the CPU time since the last scrape, counted at each. */
function processCpuTotal(register: Registry): void {
  const registers = [register];
  let last = process.cpuUsage();
  const user = new Counter({
    name: "process_cpu_user_seconds_total",
    help: "Total user CPU time spent in seconds.",
    registers,
    // One metric's collect sets all three, as prom-client's does.
    collect() {
      const now = process.cpuUsage();
      const userMicros = now.user - last.user;
      const systemMicros = now.system - last.system;
      last = now;
      user.inc(userMicros / 1e6);
      system.inc(systemMicros / 1e6);
      total.inc((userMicros + systemMicros) / 1e6);
    },
  });
  const system = new Counter({
    name: "process_cpu_system_seconds_total",
    help: "Total system CPU time spent in seconds.",
    registers,
  });
  const total = new Counter({
    name: "process_cpu_seconds_total",
    help: "Total user and system CPU time spent in seconds.",
    registers,
  });
}
