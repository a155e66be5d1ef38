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
export const collectDefaultMetrics: typeof PromClient.collectDefaultMetrics = require("prom-client/lib/defaultMetrics");
