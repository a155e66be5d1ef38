// The chart's memory settings against the sidecar's measured peak. `pglease run` as the image
// runs it (the compiled dist/, not the TypeScript sources, under the ENTRYPOINT's Node flags)
// publishes to its pod on the test API server under the chart's Role: it leads, labels the pod,
// records events, renews, and on SIGTERM demotes and releases. Its peak resident memory (VmHWM) is read from /proc throughout;
// the chart's limit must hold it with headroom, its request at least the peak itself.
import { type ChildProcess, execFile, spawn } from "node:child_process";
import { mkdir, mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { createRequire } from "node:module";
import { dirname, join, relative } from "node:path";
import { promisify } from "node:util";
import type { V1Pod } from "@kubernetes/client-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type KubeApiServer, startKubeApiServer } from "../support/kube/apiserver/index.ts";
import { kubeTools, renderChart, renderChartRole, repoRoot } from "../support/kube/chart.ts";
import { workloadPodSpec } from "../support/kube/kubelet.ts";
import { createTestDatabase, type TestDatabase } from "../support/postgres/database.ts";
import { freePort } from "../support/postgres/embedded-postgres.ts";
import { imageEntrypoint } from "../support/processes/image-entrypoint.ts";
import { skipBecause } from "../support/skip.ts";

const run = promisify(execFile);
const tools = await kubeTools();
const skip = skipBecause(
  "sidecar memory test",
  (!tools.ok && tools.reason) || (process.platform !== "linux" && "reads /proc/PID/status, Linux only"),
);

const NS = "shop";
const POD = "orders-0";
/** The limit must exceed the measured peak by this factor: heaps grow with load and versions. */
const LIMIT_HEADROOM = 1.5;
/** Renewals the leader makes (a 3 s lease renews every second), scraped meanwhile, before SIGTERM. */
const RENEWALS = 12;

interface Container {
  name: string;
  env?: { name: string; value?: string }[];
  resources?: { requests?: { memory?: string }; limits?: { memory?: string } };
}

/** A Kubernetes memory quantity (Mi, Gi, M, plain bytes) in bytes. */
function bytesOf(quantity: string): number {
  const match = /^(\d+(?:\.\d+)?)(Ki|Mi|Gi|k|M|G)?$/.exec(quantity);
  if (!match) throw new Error(`not a memory quantity: ${quantity}`);
  const factor = { Ki: 2 ** 10, Mi: 2 ** 20, Gi: 2 ** 30, k: 1e3, M: 1e6, G: 1e9 }[match[2] ?? ""] ?? 1;
  return Number(match[1]) * factor;
}

/** Peak resident set size of a live process, in bytes; null once it has exited. */
async function peakRss(pid: number): Promise<number | null> {
  try {
    const status = await readFile(`/proc/${pid}/status`, "utf8");
    const kib = /^VmHWM:\s+(\d+) kB$/m.exec(status)?.[1];
    return kib === undefined ? null : Number(kib) * 1024;
  } catch {
    return null;
  }
}

const mib = (bytes: number) => `${(bytes / 2 ** 20).toFixed(1)} MiB`;

/** Renewals counted in a /metrics scrape (the renew histogram's sample counts). */
async function renewals(port: number): Promise<number> {
  const text = await (await fetch(`http://127.0.0.1:${port}/metrics`)).text();
  const counts = text.matchAll(
    /^pglease_statement_duration_seconds_count\{[^}]*statement="renew",outcome="renewed"[^}]*\} (\d+)$/gm,
  );
  return [...counts].reduce((sum, [, n]) => sum + Number(n), 0);
}

/** The compiled CLI as a child process, run as the image's ENTRYPOINT runs it, its output kept for failure messages. */
async function spawnCli(work: string, env: NodeJS.ProcessEnv) {
  const { nodeFlags, script } = await imageEntrypoint();
  const cli = join(work, relative("dist", script));
  const child = spawn(process.execPath, [...nodeFlags, cli, "run"], {
    env,
    stdio: ["ignore", "pipe", "pipe"],
  });
  let output = "";
  const keep = (d: Buffer) => {
    output += d.toString();
  };
  child.stdout?.on("data", keep);
  child.stderr?.on("data", keep);
  const exited = new Promise<number | null>((resolve) => child.on("exit", (code) => resolve(code)));
  return { child, exited, output: () => output };
}

describe.skipIf(skip)("the sidecar's memory under the chart's limits", () => {
  let db: TestDatabase;
  let kube: KubeApiServer;
  let work: string;
  let child: ChildProcess | undefined;

  beforeAll(async () => {
    db = await createTestDatabase();
    kube = await startKubeApiServer({
      role: await renderChartRole(),
      user: `system:serviceaccount:${NS}:pglease`,
    });
    await mkdir(join(repoRoot, ".tmp"), { recursive: true });
    // Inside the repository, so the compiled CLI resolves the project's node_modules.
    work = await mkdtemp(join(repoRoot, ".tmp", "sidecar-memory-"));
    const tsc = join(
      dirname(createRequire(import.meta.url).resolve("typescript/package.json")),
      "bin",
      "tsc",
    );
    await run(process.execPath, [tsc, "-p", join(repoRoot, "tsconfig.build.json"), "--outDir", work], {
      cwd: repoRoot,
    });
    await writeFile(join(work, "kubeconfig"), kube.kubeConfig({ namespace: NS }).exportConfig());
  }, 180_000);

  afterAll(async () => {
    child?.kill("SIGKILL");
    await kube?.close();
    await db?.drop();
    if (work) await rm(work, { recursive: true, force: true });
  });

  it("peaks below the limit with headroom while publishing, and within the request", async () => {
    kube.seedPod({
      metadata: {
        name: POD,
        namespace: NS,
        labels: { "app.kubernetes.io/name": "pglease", "app.kubernetes.io/instance": "pglease" },
      },
      // Laid out as the chart lays it out; the server writes the kubelet's report of it, which the
      // chart's health gate reads.
      spec: workloadPodSpec(),
    } as V1Pod);
    const workload = (await renderChart({ lease: { name: "memory", duration: "3s" } })).find(
      (m) => m.kind === "Deployment",
    ) as unknown as { spec: { template: { spec: { initContainers: Container[] } } } };
    const sidecar = workload.spec.template.spec.initContainers.find((c) => c.name === "pglease") as Container;
    const { requests, limits } = sidecar.resources ?? {};
    expect(requests?.memory, "the chart requests memory for the sidecar").toBeDefined();
    expect(limits?.memory, "the chart limits the sidecar's memory").toBeDefined();

    const port = await freePort();
    const env = Object.fromEntries((sidecar.env ?? []).flatMap((e) => (e.value ? [[e.name, e.value]] : [])));
    const cli = await spawnCli(work, {
      PATH: process.env.PATH,
      ...env,
      DATABASE_URL: db.url,
      KUBECONFIG: join(work, "kubeconfig"),
      POD_NAME: POD,
      POD_NAMESPACE: NS,
      PGLEASE_HTTP_ADDR: `127.0.0.1:${port}`,
    });
    child = cli.child;
    const pid = child.pid as number;
    let peak = 0;
    const sampler = setInterval(async () => {
      peak = Math.max(peak, (await peakRss(pid)) ?? 0);
    }, 100);
    const label = () => kube.pod(NS, POD)?.metadata?.labels?.["pglease.io/role"];
    try {
      await expect.poll(label, { timeout: 20_000, message: cli.output() }).toBe("leader");
      await expect
        .poll(() => renewals(port), { timeout: 30_000, interval: 1_000 })
        .toBeGreaterThanOrEqual(RENEWALS);
      expect(kube.events(NS).map((e) => e.reason)).toContain("LeaderElected");
      child.kill("SIGTERM");
      expect(await cli.exited, cli.output()).toBe(0);
    } finally {
      clearInterval(sampler);
    }
    expect(label()).toBe("follower");

    const limit = bytesOf(limits?.memory as string);
    const request = bytesOf(requests?.memory as string);
    console.log(
      `sidecar peak RSS (VmHWM) while publishing: ${mib(peak)}; chart request ${requests?.memory}, limit ${limits?.memory}`,
    );
    expect(peak).toBeGreaterThan(0);
    expect(peak * LIMIT_HEADROOM, `limit ${limits?.memory} vs peak ${mib(peak)}`).toBeLessThanOrEqual(limit);
    expect(peak, `request ${requests?.memory} vs peak ${mib(peak)}`).toBeLessThanOrEqual(request);
  }, 90_000);
});
