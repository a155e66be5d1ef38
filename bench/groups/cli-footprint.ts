// The footprint group's CLI half: `pglease run` as a process, outside a cluster and publishing
// to the test API server, run as the image runs it: the compiled CLI (tsc, as the image's build
// stage compiles it) under the Dockerfile ENTRYPOINT's Node flags. Start-up is timed from spawn to
// its first `acquired` log line (a free lease each time); resident memory, and its peak, are read
// from /proc once every started process has idled.
import { execFile } from "node:child_process";
import { mkdir, mkdtemp, rm } from "node:fs/promises";
import { createRequire } from "node:module";
import { dirname, join, relative } from "node:path";
import { setTimeout as delay } from "node:timers/promises";
import { promisify } from "node:util";
import { repoRoot } from "../../test/support/kube/chart.ts";
import { imageEntrypoint } from "../../test/support/processes/image-entrypoint.ts";
import type { BenchContext, Table } from "../group.ts";
import { type LatencyStats, latencyStats } from "../measure.ts";
import { Candidate } from "../peers/candidates.ts";
import { type KubeFixture, startKubeFixture } from "../peers/kube-fixture.ts";
import { count, mb, ms } from "../report.ts";

const START_TIMEOUT_MS = 30_000;
/** How long the started processes idle (past their first renewal) before their memory is read. */
const IDLE_MS = 6_000;

export interface CliVariantFigures {
  variant: string;
  /** spawn → first `acquired` line. */
  startup: LatencyStats;
  /** Resident memory of each idle process, MB. */
  rssMb: { samples: number; meanMb: number; maxMb: number };
  /** The largest peak resident memory (VmHWM) of the processes, start-up and publishing included, MB. */
  peakRssMb: number;
}

/** Shorter in test budgets, whose lease is short. */
function idleMs(context: BenchContext): number {
  return Math.min(IDLE_MS, context.budget.peerTiming.leaseMs);
}

interface Variant {
  label: string;
  env: (pod: string) => Promise<NodeJS.ProcessEnv>;
}

/** `node` and its arguments up to the CLI's own: the image's ENTRYPOINT on a compiled CLI. */
interface CliCommand {
  nodeArgs: string[];
}

async function measureVariant(
  context: BenchContext,
  cli: CliCommand,
  variant: Variant,
  index: number,
): Promise<CliVariantFigures> {
  const started: Candidate[] = [];
  const durations: number[] = [];
  try {
    for (let i = 0; i < context.budget.cliStartups && !context.signal.aborted; i++) {
      const pod = `footprint-${index}-${i}`;
      const args = [
        "run",
        "--lease",
        `footprint-${index}-${i}`,
        "--http-addr",
        "127.0.0.1:0",
        "--log-level",
        "info",
      ];
      const env = await variant.env(pod);
      const spawnedAt = Date.now();
      const candidate = new Candidate("pglease", pod, [...cli.nodeArgs, ...args], env, process.execPath);
      started.push(candidate);
      const acquired = await candidate.waitFor(
        (l) => l.event === "acquired",
        START_TIMEOUT_MS,
        context.signal,
      );
      durations.push(acquired.receivedAt - spawnedAt);
    }
    context.signal.throwIfAborted();
    await delay(idleMs(context), undefined, { signal: context.signal });
    const rss = (await Promise.all(started.map((c) => c.rssMb()))).filter((v): v is number => v !== null);
    const peaks = (await Promise.all(started.map((c) => c.peakRssMb()))).filter(
      (v): v is number => v !== null,
    );
    return {
      variant: variant.label,
      startup: latencyStats(durations, 1),
      rssMb: {
        samples: rss.length,
        meanMb: rss.reduce((a, b) => a + b, 0) / Math.max(1, rss.length),
        maxMb: Math.max(0, ...rss),
      },
      peakRssMb: Math.max(0, ...peaks),
    };
  } finally {
    await Promise.all(started.map((c) => c.kill("SIGTERM")));
  }
}

/** Compiles the CLI into a folder of the repository (so it resolves the project's node_modules). */
async function compileCli(): Promise<{ cli: CliCommand; dir: string }> {
  await mkdir(join(repoRoot, ".tmp"), { recursive: true });
  const dir = await mkdtemp(join(repoRoot, ".tmp", "bench-cli-"));
  const tsc = join(dirname(createRequire(import.meta.url).resolve("typescript/package.json")), "bin", "tsc");
  await promisify(execFile)(
    process.execPath,
    [tsc, "-p", join(repoRoot, "tsconfig.build.json"), "--outDir", dir],
    {
      cwd: repoRoot,
    },
  );
  const { nodeFlags, script } = await imageEntrypoint();
  return { cli: { nodeArgs: [...nodeFlags, join(dir, relative("dist", script))] }, dir };
}

export async function measureCliFootprint(context: BenchContext): Promise<CliVariantFigures[]> {
  let kube: KubeFixture | undefined;
  let built: string | undefined;
  try {
    context.progress("footprint: compiling the CLI as the image's build does");
    const { cli, dir } = await compileCli();
    built = dir;
    kube = await startKubeFixture();
    const fixture = kube;
    const variants: Variant[] = [
      {
        label: "outside a cluster (publishing off)",
        env: async () => ({ DATABASE_URL: context.databaseUrl }),
      },
      {
        label: "publishing to its pod",
        env: async (pod) => {
          await fixture.seedPod(pod, {
            "app.kubernetes.io/name": "bench",
            "app.kubernetes.io/instance": "footprint",
          });
          return { DATABASE_URL: context.databaseUrl, ...fixture.env };
        },
      },
    ];
    const figures: CliVariantFigures[] = [];
    for (const [index, variant] of variants.entries()) {
      context.progress(`footprint: pglease run, ${variant.label}`);
      figures.push(await measureVariant(context, cli, variant, index));
    }
    return figures;
  } finally {
    await kube?.close();
    if (built) await rm(built, { recursive: true, force: true });
  }
}

export function cliFootprintTable(figures: CliVariantFigures[]): Table {
  return {
    title: "pglease run: start-up (spawn → first acquired) and idle resident memory",
    columns: [
      "variant",
      "start p50 ms",
      "start p99 ms",
      "start mean ms",
      "starts",
      "RSS mean MB",
      "RSS max MB",
      "peak RSS MB",
    ],
    rows: figures.map((f) => [
      f.variant,
      ms(f.startup.p50Ms),
      ms(f.startup.p99Ms),
      ms(f.startup.meanMs),
      count(f.startup.samples),
      mb(f.rssMb.meanMb),
      mb(f.rssMb.maxMb),
      mb(f.peakRssMb),
    ]),
    notes: [
      "Each start is a new process run as the image runs it (the compiled CLI under the Dockerfile ENTRYPOINT's Node flags) campaigning for a free lease: migrate, read, claim, log.",
      "RSS from /proc once every started process has idled (up to 6 s) as the leader of its own lease, default timing; peak RSS is the largest VmHWM, start-up and the first publish included (the chart's memory limit is set from it, test/chart/sidecar-memory.test.ts).",
      "With publishing, a pod shows follower before it campaigns: the first claim waits for the Kubernetes client to load and that first patch.",
    ],
  };
}
