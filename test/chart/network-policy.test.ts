// The chart's NetworkPolicy: off by default; once on, ingress only to the application's ports
// (from appFrom, else anywhere) and to the sidecar's port from the scraper (metricsFrom) alone.
// What it selects and admits is asserted on helm's render; no network plugin runs here.
import { describe, expect, it } from "vitest";
import { type ChartValues, helmTemplate, kubeTools, renderChart } from "../support/kube/chart.ts";
import { skipBecause } from "../support/skip.ts";

const tools = await kubeTools();
const skip = skipBecause("network policy tests", !tools.ok && tools.reason);

interface Rule {
  ports: { port: number; protocol: string }[];
  from?: Record<string, unknown>[];
}
interface Policy {
  spec: { podSelector: { matchLabels: Record<string, string> }; policyTypes: string[]; ingress: Rule[] };
}

const SCRAPER = [
  {
    namespaceSelector: { matchLabels: { "kubernetes.io/metadata.name": "monitoring" } },
    podSelector: { matchLabels: { "app.kubernetes.io/name": "prometheus" } },
  },
];

async function policyOf(values: ChartValues): Promise<Policy | undefined> {
  const manifests = await renderChart(values);
  return manifests.find((m) => m.kind === "NetworkPolicy") as unknown as Policy | undefined;
}

describe.skipIf(skip)("networkPolicy", () => {
  it("is off by default", async () => {
    expect(await policyOf({})).toBeUndefined();
  });

  it("admits the application's ports from anywhere and the sidecar's port from nothing, by default", async () => {
    const policy = await policyOf({ networkPolicy: { enabled: true } });
    expect(policy?.spec.podSelector.matchLabels).toEqual({
      "app.kubernetes.io/name": "pglease",
      "app.kubernetes.io/instance": "pglease",
    });
    expect(policy?.spec.policyTypes).toEqual(["Ingress"]);
    expect(policy?.spec.ingress).toEqual([{ ports: [{ port: 8080, protocol: "TCP" }] }]);
  });

  it("admits the sidecar's port from the scraper only, and the application's ports from appFrom", async () => {
    const storefront = [{ podSelector: { matchLabels: { app: "storefront" } } }];
    const policy = await policyOf({
      networkPolicy: { enabled: true, appFrom: storefront, metricsFrom: SCRAPER },
      sidecar: { httpPort: 9000 },
      app: { ports: [{ name: "grpc", containerPort: 9090, protocol: "TCP" }] },
    });
    expect(policy?.spec.ingress).toEqual([
      { ports: [{ port: 9090, protocol: "TCP" }], from: storefront },
      { ports: [{ port: 9000, protocol: "TCP" }], from: SCRAPER },
    ]);
  });

  it("refuses a ServiceMonitor whose scrapes the policy would drop, naming the value to set", async () => {
    const refused = await helmTemplate({
      networkPolicy: { enabled: true },
      metrics: { serviceMonitor: { enabled: true } },
    });
    expect(refused.ok).toBe(false);
    expect(refused.ok ? "" : refused.error).toMatch(
      /networkPolicy\.metricsFrom: with networkPolicy\.enabled/,
    );
    const scraped = await policyOf({
      networkPolicy: { enabled: true, metricsFrom: SCRAPER },
      metrics: { serviceMonitor: { enabled: true } },
    });
    expect(scraped?.spec.ingress.at(-1)).toEqual({ ports: [{ port: 8484, protocol: "TCP" }], from: SCRAPER });
  });

  it("takes only NetworkPolicy peers in appFrom and metricsFrom", async () => {
    const refused = await helmTemplate({
      networkPolicy: { enabled: true, metricsFrom: [{ namespace: "x" }] },
    });
    expect(refused.ok ? "" : refused.error).toMatch(
      /\/networkPolicy\/metricsFrom\/0.*'namespace' not allowed/,
    );
  });
});
