// What `pglease run` loads at start costs the sidecar resident memory for its whole life
// (issue 30: <= 64 MiB publishing). An ESM import of a built-in module builds its namespace from
// every export, lazy getters included: `import { createServer } from "node:http"` runs
// http.WebSocket's getter, which loads undici with http2 and the web streams, none of which
// pglease uses; `node:fs/promises` loads readline and the file watchers. src/ takes such
// built-ins from process.getBuiltinModule instead, and prom-client's parts from their own files
// (its index loads its Pushgateway with node:zlib), and the process CPU counters
// are pglease's own (prom-client's load @opentelemetry/api). This checks the module graph of `pglease run`
// in a fresh Node, as the CLI loads it, with what it loads when it publishes to its pod; and what
// a running `pglease run` loaded by the time it exits, for what is loaded on a call, not an import.
import { execFile } from "node:child_process";
import { mkdtemp, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { promisify } from "node:util";
import { describe, expect, it } from "vitest";
import { startLeaseRun } from "../support/processes/cli.ts";
import { cliSuite } from "../support/processes/cli-suite.ts";

const run = promisify(execFile);
const SRC = join(import.meta.dirname, "..", "..", "src");
/** The run command and what its publishing loads on demand (sidecar/publishing.ts). */
const RUN_PATH = ["cli/run.ts", "kube/pod-publisher.ts", "kube/client/load-connection.ts"].map(
  (file) => pathToFileURL(join(SRC, file)).href,
);

const METRICS = pathToFileURL(join(SRC, "observability/metrics.ts")).href;
const LOADED_BUILTINS = fileURLToPath(new URL("../support/processes/loaded-builtins.ts", import.meta.url));

/** The built-in modules among process.moduleLoadList's entries. */
function builtinsIn(moduleLoadList: readonly string[]): string[] {
  return moduleLoadList
    .filter((entry) => entry.startsWith("NativeModule "))
    .map((entry) => entry.slice("NativeModule ".length));
}

/**
 * Built-in modules the sidecar never uses: loaded only by an unused export's getter (the WebSocket
 * of node:http), by node:fs/promises, by prom-client's index, for a kubeconfig exec plugin, or to
 * ask whether the restart lock is taken on a worker thread (the sidecar is a main thread). A
 * running sidecar has child_process all the same: node:net loads it, with cluster and dgram, at a
 * server's first listen.
 */
const NEVER_USED = [
  "internal/deps/undici/undici",
  "http2",
  "internal/webstreams/readablestream",
  "fs/promises",
  "internal/readline/interface",
  "zlib",
  "child_process",
  "worker_threads",
];

describe("pglease run's module graph", () => {
  it("loads no built-in module it does not use, nor prom-client's index", async () => {
    // The sidecar's metrics registered as run registers them: the default metrics load their files then.
    const script = `for (const url of ${JSON.stringify(RUN_PATH)}) await import(url);
const { SidecarMetrics } = await import(${JSON.stringify(METRICS)});
new SidecarMetrics();
const { createRequire } = await import("node:module");
process.stdout.write(JSON.stringify({ builtins: process.moduleLoadList, files: Object.keys(createRequire(import.meta.url).cache) }));`;
    const { stdout } = await run(process.execPath, ["--input-type=module", "-e", script]);
    const { builtins, files } = JSON.parse(stdout) as { builtins: string[]; files: string[] };
    const loaded = builtinsIn(builtins);
    expect(loaded).toContain("http");
    expect(loaded).toContain("https");
    for (const name of NEVER_USED) expect(loaded, `${name} was loaded`).not.toContain(name);
    const promClient = files.filter((file) => file.includes("/node_modules/prom-client/"));
    expect(promClient, "prom-client's registry loaded").toContainEqual(
      expect.stringMatching(/lib\/registry\.js$/),
    );
    expect(promClient, "prom-client's index loaded").not.toContainEqual(
      expect.stringMatching(/prom-client\/index\.js$/),
    );
    // Loaded by prom-client's processCpuTotal for exemplars, which pglease never enables.
    expect(files, "@opentelemetry/api loaded").not.toContainEqual(
      expect.stringMatching(/\/@opentelemetry\/api\//),
    );
  });
});

describe("pglease run as it runs", () => {
  const suite = cliSuite();

  it("takes its restart lock without loading node:worker_threads: it is its process's main thread", async () => {
    const dir = await mkdtemp(join(tmpdir(), "pglease-builtins-"));
    try {
      const list = join(dir, "builtins.json");
      const env = {
        DATABASE_URL: suite.db.url,
        POD_NAME: "graph-0",
        POD_UID: "uid-graph",
        NODE_OPTIONS: `--import ${LOADED_BUILTINS}`,
        PGLEASE_TEST_LOADED_BUILTINS: list,
      };
      const { run } = await startLeaseRun("graph", "60s", env);
      suite.track(run);
      const acquired = await run.waitForLog(/^acquired lease graph/);
      // The restart proof in its holder: the lock was taken, its thread check passed.
      expect(String(acquired.holder)).toMatch(/#r:[0-9a-f]{32}\./);
      expect((await run.stop("SIGTERM")).code).toBe(0);
      const loaded = builtinsIn(JSON.parse(await readFile(list, "utf8")) as string[]);
      expect(loaded).toContain("net");
      expect(loaded, "worker_threads was loaded").not.toContain("worker_threads");
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});
