// What the sidecar exports, as Prometheus stores it: each metric's name and labels (histograms as
// their _bucket series with `le`), and the labels prometheus-operator's ServiceMonitor adds to
// every series of a target. The dashboard's queries, the alerts' queries and the alerts' test
// series are checked against it.
import { SidecarMetrics } from "../../src/observability/metrics.ts";

/** Labels prometheus-operator's ServiceMonitor attaches to every scraped series. */
export const TARGET_LABELS = ["namespace", "pod", "service", "job", "instance", "container", "endpoint"];

/** Metric name to its own label names, from a sidecar's registry (the health gate's included). */
export function exportedMetrics(): Map<string, string[]> {
  const sidecar = new SidecarMetrics();
  sidecar.watchHealth("pod", () => ({ ready: true, handovers: 0 }));
  const metrics = new Map<string, string[]>();
  for (const metric of sidecar.registry.getMetricsAsArray()) {
    const { name, labelNames = [] } = metric as unknown as { name: string; labelNames?: string[] };
    metrics.set(name, labelNames);
    if (metric.constructor.name === "Histogram") {
      metrics.set(`${name}_bucket`, [...labelNames, "le"]);
      metrics.set(`${name}_count`, labelNames);
      metrics.set(`${name}_sum`, labelNames);
    }
  }
  return metrics;
}
