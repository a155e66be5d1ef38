// The sidecar's probes as the chart renders them, and against the real CLI: a startupProbe on
// /healthz whose budget outlasts --start-timeout, so the kubelet never restarts a sidecar that
// is still waiting for PostgreSQL; pglease's own deadline (exit 1 with its message) comes first.
import { readFile } from "node:fs/promises";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { parse } from "yaml";
import { type ChartValues, helmTemplate, kubeTools, renderChart, repoRoot } from "../support/kube/chart.ts";
import { freePort } from "../support/postgres/embedded-postgres.ts";
import { startPglease } from "../support/processes/cli.ts";
import { skipBecause } from "../support/skip.ts";

const tools = await kubeTools();
const skip = skipBecause("chart probe tests", !tools.ok && tools.reason);

interface Probe {
  httpGet?: { path: string; port: string | number };
  periodSeconds?: number;
  timeoutSeconds?: number;
  failureThreshold?: number;
}
interface Container {
  name: string;
  args?: string[];
  env?: { name: string; value?: string }[];
  startupProbe?: Probe;
  livenessProbe?: Probe;
  readinessProbe?: Probe;
}

async function sidecarOf(values: ChartValues): Promise<Container> {
  // Outside a cluster there is no pod whose container statuses the health gate could read.
  const workload = (await renderChart({ ...values, health: { gate: "off" } })).find(
    (m) => m.kind === "Deployment",
  ) as unknown as {
    spec: { template: { spec: { initContainers: Container[] } } };
  };
  return workload.spec.template.spec.initContainers.find((c) => c.name === "pglease") as Container;
}

/** How long the kubelet lets a container fail its startup probe before it restarts it. */
const startupBudgetMs = (probe: Probe) => (probe.periodSeconds ?? 10) * (probe.failureThreshold ?? 3) * 1000;
const envValue = (c: Container, name: string) => c.env?.find((e) => e.name === name)?.value;

describe.skipIf(skip)("the sidecar's probes", () => {
  it.each<[string, number]>([
    ["60s", 60_000],
    ["2m", 120_000],
  ])("gives start-up (start timeout %s) 30 s more than the start timeout", async (startTimeout, ms) => {
    const sidecar = await sidecarOf({ sidecar: { startTimeout } });
    expect(envValue(sidecar, "PGLEASE_START_TIMEOUT")).toBe(startTimeout);
    expect(sidecar.startupProbe?.httpGet).toEqual({ path: "/healthz", port: "pglease" });
    expect(startupBudgetMs(sidecar.startupProbe as Probe)).toBeGreaterThanOrEqual(ms + 30_000);
    expect(startupBudgetMs(sidecar.startupProbe as Probe)).toBeLessThan(ms + 30_000 + 5_000);
    // The kubelet runs liveness only once the startup probe has passed.
    expect(sidecar.livenessProbe?.httpGet).toEqual({ path: "/healthz", port: "pglease" });
  });

  // A native sidecar's readiness counts toward the pod's Ready: after a restart of pglease in
  // place the pod is Ready again only once the startup probe, then the readiness probe, have
  // passed on the new container, each at its next period. charts/pglease/README.md, "The
  // sidecar's readiness is the pod's".
  it("probes start-up and readiness every second, and takes 15 s of failures to turn unready", async () => {
    const sidecar = await sidecarOf({});
    expect(sidecar.startupProbe?.periodSeconds).toBe(1);
    expect(sidecar.readinessProbe?.httpGet).toEqual({ path: "/readyz", port: "pglease" });
    expect(sidecar.readinessProbe?.periodSeconds).toBe(1);
    const readiness = sidecar.readinessProbe as Probe;
    expect((readiness.periodSeconds ?? 10) * (readiness.failureThreshold ?? 3)).toBe(15);
  });

  it("gives the plain sidecar patch in deploy/sidecar the chart's probes", async () => {
    const patch = parse(
      await readFile(join(repoRoot, "deploy", "sidecar", "sidecar-patch.yaml"), "utf8"),
    ) as {
      spec: { template: { spec: { initContainers: Container[] } } };
    };
    const plain = patch.spec.template.spec.initContainers.find((c) => c.name === "pglease") as Container;
    const chart = await sidecarOf({});
    for (const probe of ["startupProbe", "livenessProbe", "readinessProbe"] as const) {
      expect(plain[probe], probe).toEqual(chart[probe]);
    }
  });

  it("refuses a startup probe that gives up before the start timeout", async () => {
    const rendered = await helmTemplate({
      sidecar: { startTimeout: "60s", startupProbe: { periodSeconds: 10, failureThreshold: 3 } },
    });
    expect(rendered.ok ? "" : rendered.error).toMatch(
      /sidecar\.startupProbe allows 30000 ms .* not more than sidecar\.startTimeout \(60s\)/,
    );
  });

  it("sees /healthz answer while PostgreSQL is away, and pglease exit on its own deadline first", async () => {
    const sidecar = await sidecarOf({ sidecar: { startTimeout: "4s" } });
    const budgetMs = startupBudgetMs(sidecar.startupProbe as Probe);
    const env = Object.fromEntries((sidecar.env ?? []).flatMap((e) => (e.value ? [[e.name, e.value]] : [])));
    const [httpPort, closedPort] = [await freePort(), await freePort()];
    const startedAt = performance.now();
    const running = startPglease(sidecar.args ?? [], {
      ...env,
      DATABASE_URL: `postgres://pglease:x@127.0.0.1:${closedPort}/pglease?sslmode=disable`,
      PGLEASE_HTTP_ADDR: `127.0.0.1:${httpPort}`,
    });
    let exited = false;
    void running.exited.then(() => {
      exited = true;
    });
    // What a probe sees until the process exits: every answer that came is 200 "starting".
    const answers: string[] = [];
    while (!exited) {
      const answer = await fetch(`http://127.0.0.1:${httpPort}/healthz`).then(
        async (r) => `${r.status} ${JSON.stringify(await r.json())}`,
        () => "no answer",
      );
      if (!exited) answers.push(answer);
      await new Promise((resolve) => setTimeout(resolve, 250));
    }
    const exit = await running.exited;
    const elapsed = performance.now() - startedAt;
    expect(exit.code, exit.stdout + exit.stderr).toBe(1);
    expect(answers.filter((a) => a !== "no answer")).not.toEqual([]);
    expect(new Set(answers.filter((a) => a !== "no answer"))).toEqual(new Set(['200 {"status":"starting"}']));
    expect(elapsed).toBeGreaterThanOrEqual(4_000);
    expect(elapsed).toBeLessThan(budgetMs);
  }, 60_000);
});
