// A real Prometheus (Debian's `prometheus` package) on the host, scraping the sidecars of one
// namespace as a user's own scrape configuration would, without the chart's ServiceMonitor. Debian
// builds it without kubernetes_sd_configs, so the pods are found as that would find them (every pod
// of the namespace with an IP, terminating ones included, read from the cluster's API server each
// interval) and handed over through file_sd_configs. It scrapes their pod IPs through the host's
// route into the node: only the cluster's own addresses. It evaluates the chart's rendered
// PrometheusRule as a rule file.
import { type ChildProcess, execFile, spawn } from "node:child_process";
import { mkdtemp, open, readFile, rename, rm, writeFile } from "node:fs/promises";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { stringify } from "yaml";

const run = promisify(execFile);

/** Why this machine has no Prometheus server, or null. */
export async function prometheusMissing(): Promise<string | null> {
  return run("prometheus", ["--version"]).then(
    () => null,
    () => "the prometheus server is not installed (apt-get install prometheus)",
  );
}

export interface PrometheusOptions {
  namespace: string;
  /** The job name of the scrape configuration: what the rules' `metrics.prometheusRule.job` names. */
  job: string;
  /** The sidecars' port. */
  port: number;
  /** The namespace's pods with an IP (terminating ones too), as service discovery would list them. */
  pods(): Promise<{ name: string; ip: string }[]>;
  /** Scrape, rule evaluation and discovery interval, in seconds. */
  intervalSeconds: number;
  /** The rule groups (the PrometheusRule's spec.groups). */
  groups: unknown[];
}

export interface Sample {
  metric: Record<string, string>;
  value: [number, string];
}
export interface RangeSeries {
  metric: Record<string, string>;
  values: [number, string][];
}

export interface Prometheus {
  /** An instant query's vector. */
  query(expr: string): Promise<Sample[]>;
  /** A range query's matrix, start and end in seconds since the epoch. */
  queryRange(expr: string, start: number, end: number, step: string): Promise<RangeSeries[]>;
  /** The last lines of its log, for a failure message. */
  log(): Promise<string>;
  stop(): Promise<void>;
}

async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.on("error", reject);
    server.listen(0, "127.0.0.1", () => {
      const address = server.address();
      server.close(() => resolve(typeof address === "object" && address ? address.port : 0));
    });
  });
}

export async function startPrometheus(options: PrometheusOptions): Promise<Prometheus> {
  const dir = await mkdtemp(join(tmpdir(), "pglease-prometheus-"));
  const interval = `${options.intervalSeconds}s`;
  const config = {
    global: { scrape_interval: interval, evaluation_interval: interval },
    rule_files: [join(dir, "rules.yaml")],
    scrape_configs: [
      {
        job_name: options.job,
        scrape_timeout: interval,
        file_sd_configs: [{ files: [join(dir, "targets.json")], refresh_interval: interval }],
      },
    ],
  };
  await writeFile(join(dir, "prometheus.yaml"), stringify(config));
  await writeFile(join(dir, "rules.yaml"), stringify({ groups: options.groups }));
  // The target labels a ServiceMonitor or PodMonitor gives: namespace, pod. Written whole, then renamed.
  const discover = async () => {
    const targets = (await options.pods()).map((pod) => ({
      targets: [`${pod.ip}:${options.port}`],
      labels: { namespace: options.namespace, pod: pod.name },
    }));
    await writeFile(join(dir, "targets.json.next"), JSON.stringify(targets));
    await rename(join(dir, "targets.json.next"), join(dir, "targets.json"));
  };
  await discover();
  await run("promtool", ["check", "config", join(dir, "prometheus.yaml")]);

  const port = await freePort();
  const logPath = join(dir, "prometheus.log");
  const out = await open(logPath, "a");
  const child: ChildProcess = spawn(
    "prometheus",
    [
      `--config.file=${join(dir, "prometheus.yaml")}`,
      `--storage.tsdb.path=${join(dir, "data")}`,
      `--web.listen-address=127.0.0.1:${port}`,
    ],
    { stdio: ["ignore", out.fd, out.fd] },
  );
  await out.close();
  const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()));
  const base = `http://127.0.0.1:${port}`;
  const log = async () => (await readFile(logPath, "utf8").catch(() => "")).split("\n").slice(-20).join("\n");
  const api = async <T>(path: string, params: Record<string, string>): Promise<T> => {
    const response = await fetch(`${base}${path}?${new URLSearchParams(params)}`);
    const body = (await response.json()) as { status: string; data: { result: T }; error?: string };
    if (body.status !== "success") throw new Error(`prometheus ${path}: ${body.error}`);
    return body.data.result;
  };
  let discovering = true;
  const discovery = (async () => {
    while (discovering) {
      await discover().catch(() => undefined); // the API server answers again at the next round
      await new Promise((resolve) => setTimeout(resolve, options.intervalSeconds * 1000));
    }
  })();
  const stop = async () => {
    discovering = false;
    await discovery;
    if (child.exitCode === null && child.signalCode === null) child.kill("SIGTERM");
    await exited;
    await rm(dir, { recursive: true, force: true });
  };

  const deadline = Date.now() + 60_000;
  for (;;) {
    const ready = await fetch(`${base}/-/ready`).then(
      (r) => r.ok,
      () => false,
    );
    if (ready) break;
    if (child.exitCode !== null || Date.now() > deadline) {
      const text = await log();
      await stop();
      throw new Error(`prometheus did not become ready:\n${text}`);
    }
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
  return {
    query: (expr) => api<Sample[]>("/api/v1/query", { query: expr }),
    queryRange: (expr, start, end, step) =>
      api<RangeSeries[]>("/api/v1/query_range", {
        query: expr,
        start: String(start),
        end: String(end),
        step,
      }),
    log,
    stop,
  };
}
