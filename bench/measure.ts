// Timing loops bounded in count and in time, and the statistics the tables print.

import { setFlagsFromString } from "node:v8";
import { runInNewContext } from "node:vm";

export interface Sampling {
  warmup: number;
  warmupMaxMs: number;
  iterations: number;
  maxMs: number;
}

export interface LatencyStats {
  samples: number;
  p50Ms: number;
  p99Ms: number;
  meanMs: number;
  /** concurrency ÷ mean latency (Little's law): the rate of a loop doing only this statement. */
  opsPerSec: number;
}

/** One worker's iteration: steps run in order, each timed under its own label. */
export type Steps = ReadonlyArray<readonly [label: string, run: () => Promise<unknown>]>;

/**
 * Runs `concurrency` workers that share one iteration counter, first untimed (warm-up) then
 * timed, and answers the latency samples per step label. Each phase stops early at its time
 * cap, and both on abort.
 */
export async function timeSteps(
  concurrency: number,
  sampling: Sampling,
  signal: AbortSignal,
  stepsFor: (worker: number) => Steps,
): Promise<Map<string, number[]>> {
  const workers = Array.from({ length: concurrency }, (_, index) => stepsFor(index));
  const samples = new Map<string, number[]>();
  await loop(sampling.warmup, sampling.warmupMaxMs, false);
  await loop(sampling.iterations, sampling.maxMs, true);
  signal.throwIfAborted();
  return samples;

  async function loop(count: number, maxMs: number, keep: boolean): Promise<void> {
    let started = 0;
    const deadline = performance.now() + maxMs;
    await Promise.all(
      workers.map(async (steps) => {
        while (started < count && !signal.aborted && performance.now() < deadline) {
          started++;
          for (const [label, run] of steps) {
            const t0 = performance.now();
            await run();
            const elapsed = performance.now() - t0;
            if (!keep) continue;
            const list = samples.get(label) ?? [];
            if (list.length === 0) samples.set(label, list);
            list.push(elapsed);
          }
        }
      }),
    );
  }
}

/** Nearest-rank percentile of sorted values. */
function percentile(sorted: number[], fraction: number): number {
  const index = Math.min(sorted.length - 1, Math.max(0, Math.ceil(fraction * sorted.length) - 1));
  return sorted[index] ?? Number.NaN;
}

export function latencyStats(samples: number[], concurrency: number): LatencyStats {
  if (samples.length === 0) throw new Error("no samples: the figure was cut off before its first iteration");
  const sorted = [...samples].sort((a, b) => a - b);
  const meanMs = sorted.reduce((sum, value) => sum + value, 0) / sorted.length;
  return {
    samples: sorted.length,
    p50Ms: percentile(sorted, 0.5),
    p99Ms: percentile(sorted, 0.99),
    meanMs,
    opsPerSec: (concurrency * 1000) / meanMs,
  };
}

export function samplesOf(samples: Map<string, number[]>, label: string): number[] {
  const list = samples.get(label);
  if (!list) throw new Error(`no samples for ${label}`);
  return list;
}

/** Runs `once` up to `count` times within maxMs and answers each run's duration in ms. */
export async function timeRepeated(
  count: number,
  maxMs: number,
  signal: AbortSignal,
  once: (index: number) => Promise<unknown>,
): Promise<number[]> {
  const durations: number[] = [];
  const deadline = performance.now() + maxMs;
  for (let i = 0; i < count && !signal.aborted && performance.now() < deadline; i++) {
    const t0 = performance.now();
    await once(i);
    durations.push(performance.now() - t0);
  }
  signal.throwIfAborted();
  return durations;
}

export interface MemoryFigures {
  rssMb: number;
  heapUsedMb: number;
  /** Whether a full collection ran first; without it the heap figure includes garbage. */
  afterGc: boolean;
}

// The package script cannot pass --expose-gc, so the flag is set at run time and gc() fetched
// from a fresh context; a memory figure after a collection is far steadier than one without.
function collector(): (() => void) | null {
  const exposed = (globalThis as { gc?: () => void }).gc;
  if (exposed) return exposed;
  try {
    setFlagsFromString("--expose-gc");
    return runInNewContext("gc") as () => void;
  } catch {
    return null;
  }
}

const gc = collector();

export function memoryNow(): MemoryFigures {
  gc?.();
  const usage = process.memoryUsage();
  return { rssMb: usage.rss / 2 ** 20, heapUsedMb: usage.heapUsed / 2 ** 20, afterGc: gc !== null };
}

/** CPU time (user + system) this process spent while `work` ran, in ms. */
export async function cpuMsDuring(work: () => Promise<unknown>): Promise<number> {
  const before = process.cpuUsage();
  await work();
  const spent = process.cpuUsage(before);
  return (spent.user + spent.system) / 1000;
}
