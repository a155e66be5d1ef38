// The sidecar's settings as the chart renders them, handed to the real `pglease run` on a real
// PostgreSQL: every PGLEASE_* variable and value the chart writes is one the CLI accepts, and
// with them the process leads, answers its probes, and on SIGTERM releases the lease and exits.
// (Outside a cluster, without POD_NAME, it publishes nothing; the pod side is tested elsewhere.)
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { kubeTools, renderChart } from "../support/kube/chart.ts";
import { createTestDatabase, type TestDatabase } from "../support/postgres/database.ts";
import { freePort } from "../support/postgres/embedded-postgres.ts";
import { type Running, startPglease } from "../support/processes/cli.ts";
import { skipBecause } from "../support/skip.ts";

const tools = await kubeTools();
const skip = skipBecause("chart sidecar-env test", !tools.ok && tools.reason);

interface EnvVar {
  name: string;
  value?: string;
  valueFrom?: unknown;
}
interface Container {
  name: string;
  args?: string[];
  env?: EnvVar[];
}

describe.skipIf(skip)("the chart's sidecar settings", () => {
  let db: TestDatabase;
  let running: Running | undefined;
  beforeAll(async () => {
    db = await createTestDatabase();
  });
  afterEach(async () => {
    await running?.stop("SIGKILL");
  });
  afterAll(async () => {
    await db?.drop();
  });

  it("run the real CLI: it leads, answers its probes, and releases on SIGTERM", async () => {
    const port = await freePort();
    const manifests = await renderChart({
      lease: { name: "chart-env", additional: ["chart-env-extra"], duration: "3s", gracePeriod: "5s" },
      // Outside a cluster no pod reports container statuses: the gate probes the sidecar's own
      // /healthz, which answers from the start, so every health value still reaches the CLI.
      health: { gate: "url", url: `http://127.0.0.1:${port}/healthz` },
      database: { schema: "public", table: "chart_env_leases" },
      sidecar: { logLevel: "debug" },
      cluster: { name: "east" },
      history: { maxAge: "36h", maxRowsPerKey: 50 },
    });
    const workload = manifests.find((m) => m.kind === "Deployment") as unknown as {
      spec: { template: { spec: { initContainers: Container[] } } };
    };
    const sidecar = workload.spec.template.spec.initContainers.find((c) => c.name === "pglease") as Container;
    const fromValues = Object.fromEntries(
      (sidecar.env ?? []).filter((e) => e.value !== undefined).map((e) => [e.name, e.value]),
    );
    // Given by the cluster, not the chart: the pod's identity, its revision and the Secret's URL.
    expect((sidecar.env ?? []).filter((e) => e.valueFrom !== undefined).map((e) => e.name)).toEqual([
      "POD_NAME",
      "POD_NAMESPACE",
      "POD_UID",
      "POD_TEMPLATE_HASH",
      "CONTROLLER_REVISION_HASH",
      "DATABASE_URL",
    ]);
    expect(Object.keys(fromValues).filter((k) => !k.startsWith("PGLEASE_"))).toEqual([]);

    running = startPglease(sidecar.args ?? [], {
      ...fromValues,
      DATABASE_URL: db.url,
      // The chart listens on 0.0.0.0:8484 for the kubelet; here a free loopback port.
      PGLEASE_HTTP_ADDR: `127.0.0.1:${port}`,
    });
    const get = (path: string) => fetch(`http://127.0.0.1:${port}${path}`);
    // Alone on a fresh table it leads both leases at once; wait for the HTTP server to answer.
    await running.waitForLog(/chart-env-extra/, 20_000);
    await expect
      .poll(async () => (await get("/leader?lease=chart-env")).status, { timeout: 10_000 })
      .toBe(200);
    expect((await get("/leader?lease=chart-env-extra")).status).toBe(200);
    expect((await get("/healthz")).status).toBe(200);
    expect((await get("/readyz")).status).toBe(200);
    // cluster.name reaches the holder identity and /status.
    const status = (await (await get("/status")).json()) as {
      holder: string;
      cluster: string | null;
      leases: Array<{ leader: string | null; leaderCluster: string | null }>;
    };
    expect(status.cluster).toBe("east");
    expect(status.holder).toMatch(/^east\//);
    expect(status.leases[0]).toMatchObject({ leader: status.holder, leaderCluster: "east" });
    const metrics = await (await get("/metrics")).text();
    expect(metrics).toMatch(/leader_election_master_status\{name="chart-env"\} 1/);
    expect(metrics).toMatch(/leader_election_master_status\{name="chart-env-extra"\} 1/);

    const exit = await running.stop("SIGTERM");
    expect(exit.code).toBe(0);
    expect(exit.stdout).toMatch(/released lease chart-env\b/);
  });
});
