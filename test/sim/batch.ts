// Runs a range of seeds and tallies what broke, in this thread or in worker threads (one per
// core: schedules share nothing, so two cores run twice as many).
import { availableParallelism } from "node:os";
import { Worker } from "node:worker_threads";
import type { ViolationKind } from "./checker.ts";
import type { Family } from "./faults.ts";
import { makeScenario, type SimOptions } from "./scenario.ts";
import { runSchedule } from "./schedule.ts";

export interface BatchSpec {
  from: number;
  count: number;
  /** This worker runs the seeds from + i·stride + offset. */
  offset?: number;
  stride?: number;
  options: SerializedOptions;
}

/** SimOptions as they cross to a worker thread. */
export interface SerializedOptions extends Omit<SimOptions, "families"> {
  families: Family[];
}

export interface BatchResult {
  schedules: number;
  simulatedMs: number;
  /** CPU time of the threads that ran the schedules, ms (what a quiet machine would take). */
  cpuMs: number;
  /** Seeds that broke each invariant (all of them; the caller shortens). */
  failures: Partial<Record<ViolationKind, number[]>>;
}

function addFailures(result: BatchResult, kind: ViolationKind, seeds: number[]): void {
  const list = result.failures[kind] ?? [];
  list.push(...seeds);
  result.failures[kind] = list;
}

export const deserialize = (o: SerializedOptions): SimOptions => ({ ...o, families: new Set(o.families) });

export async function runBatch(spec: BatchSpec): Promise<BatchResult> {
  const options = deserialize(spec.options);
  const stride = spec.stride ?? 1;
  const result: BatchResult = { schedules: 0, simulatedMs: 0, cpuMs: 0, failures: {} };
  const cpu = threadCpuMs();
  for (let seed = spec.from + (spec.offset ?? 0); seed < spec.from + spec.count; seed += stride) {
    const run = await runSchedule(makeScenario(seed, options), options);
    result.schedules++;
    result.simulatedMs += run.simulatedMs;
    if (run.violation) addFailures(result, run.violation.kind, [seed]);
  }
  result.cpuMs = threadCpuMs() - cpu;
  return result;
}

/** This thread's CPU time (Node ≥ 23.9), else the process's. */
function threadCpuMs(): number {
  const usage =
    (process as { threadCpuUsage?: () => NodeJS.CpuUsage }).threadCpuUsage?.() ?? process.cpuUsage();
  return (usage.user + usage.system) / 1000;
}

/** Splits the seeds over `workers` threads (interleaved, so slow seeds spread out) and merges. */
export async function runParallel(
  spec: BatchSpec,
  workers = Math.min(availableParallelism(), 8),
): Promise<BatchResult> {
  if (workers <= 1) return runBatch(spec);
  const parts = await Promise.all(
    Array.from(
      { length: workers },
      (_, offset) =>
        new Promise<BatchResult>((resolve, reject) => {
          const worker = new Worker(new URL("./worker.ts", import.meta.url), {
            workerData: { ...spec, offset, stride: workers },
          });
          worker.once("message", resolve);
          worker.once("error", reject);
          worker.once("exit", (code) => {
            if (code !== 0) reject(new Error(`simulation worker ${offset} exited with code ${code}`));
          });
        }),
    ),
  );
  const merged: BatchResult = { schedules: 0, simulatedMs: 0, cpuMs: 0, failures: {} };
  for (const part of parts) {
    merged.schedules += part.schedules;
    merged.simulatedMs += part.simulatedMs;
    merged.cpuMs += part.cpuMs;
    for (const [kind, seeds] of Object.entries(part.failures) as Array<[ViolationKind, number[]]>) {
      addFailures(merged, kind, seeds);
    }
  }
  for (const seeds of Object.values(merged.failures)) seeds.sort((a, b) => a - b);
  return merged;
}
