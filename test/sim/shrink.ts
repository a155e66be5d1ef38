// Delta debugging (Zeller's ddmin) over a failing schedule's fault list: the smallest list of
// faults, with the same seed for every other choice, that still breaks the same invariant.
import type { ViolationKind } from "./checker.ts";
import type { Scenario, SimOptions } from "./scenario.ts";
import { runSchedule } from "./schedule.ts";

export interface Shrunk {
  /** Indices into scenario.faults. */
  keep: number[];
  runs: number;
}

export async function shrink(
  scenario: Scenario,
  options: SimOptions,
  kind: ViolationKind,
  maxRuns = 400,
): Promise<Shrunk> {
  let runs = 0;
  const fails = async (keep: number[]) => {
    runs++;
    const result = await runSchedule(scenario, options, { keep });
    return result.violation?.kind === kind;
  };
  let keep = scenario.faults.map((_, i) => i);
  if (await fails([])) return { keep: [], runs };
  let parts = 2;
  while (keep.length >= 2 && runs < maxRuns) {
    const chunks = split(keep, parts);
    let reduced = false;
    for (const chunk of chunks) {
      if (await fails(chunk)) {
        keep = chunk;
        parts = 2;
        reduced = true;
        break;
      }
    }
    if (!reduced) {
      for (const chunk of chunks) {
        const rest = keep.filter((i) => !chunk.includes(i));
        if (rest.length > 0 && (await fails(rest))) {
          keep = rest;
          parts = Math.max(parts - 1, 2);
          reduced = true;
          break;
        }
      }
    }
    if (!reduced) {
      if (parts >= keep.length) break;
      parts = Math.min(parts * 2, keep.length);
    }
  }
  return { keep, runs };
}

function split(items: number[], parts: number): number[][] {
  const size = Math.ceil(items.length / parts);
  const chunks: number[][] = [];
  for (let i = 0; i < items.length; i += size) chunks.push(items.slice(i, i + size));
  return chunks;
}
