// What `npm run bench:docs` writes, from the committed reference results alone: the targets'
// verdicts in the reference evaluated again (bench/targets.ts may have changed since the run; the
// figures they read have not), the marked regions of docs/performance.md and docs/operations.md, and the
// failover chart beside the results. The docs test compares the files with this, so a figure
// cannot drift from its source.
import { readFile } from "node:fs/promises";
import { join } from "node:path";
import { failoverSvg } from "../failover-chart.ts";
import type { PeerFigures } from "../groups/peers.ts";
import { type ResultsDocument, readResults } from "../results.ts";
import { evaluateTargets } from "../targets.ts";
import { clustersFailover } from "./clusters.ts";
import { type Render, rewriteRegions } from "./markers.ts";
import {
  saysAdvisory,
  saysCrash,
  saysGraceful,
  saysScale,
  saysStatements,
  saysSteady,
  tables,
} from "./performance.ts";
import { saysRealCluster } from "./real-cluster.ts";
import { Reference } from "./reference.ts";
import { rolloutTable } from "./rollout.ts";
import { peersKube, peersTrials, runs, targets } from "./shared.ts";
import { failover, statements, steady } from "./summary.ts";
import { saysTakeover, takeoverSummary } from "./takeover.ts";

export const REFERENCE = "bench/reference/results.json";
export const DOCS = ["docs/performance.md", "docs/operations.md"];
export const CHART = "bench/reference/failover.svg";

/** Every region a doc may hold, by name. To add one: a function here, a marker in the doc. */
function regionRenderers(document: ResultsDocument): Record<string, () => string> {
  const ref = new Reference(document);
  return {
    runs: () => runs(ref),
    targets: () => targets(ref),
    "peers-kube": () => peersKube(ref),
    "peers-trials": () => peersTrials(ref),
    "summary-failover": () => failover(ref),
    "summary-steady": () => steady(ref),
    "summary-statements": () => statements(ref),
    "summary-takeover": () => takeoverSummary(ref),
    "clusters-failover": () => clustersFailover(ref),
    rollout: () => rolloutTable(ref),
    tables: () => tables(document),
    "says-crash": () => saysCrash(ref),
    "says-advisory": () => saysAdvisory(ref),
    "says-takeover": () => saysTakeover(ref),
    "says-graceful": () => saysGraceful(ref),
    "says-steady": () => saysSteady(ref),
    "says-statements": () => saysStatements(ref),
    "says-scale": () => saysScale(ref),
    "says-real-cluster": () => saysRealCluster(ref),
  };
}

export function renderer(document: ResultsDocument): Render {
  const renderers = regionRenderers(document);
  return (name) => (Object.hasOwn(renderers, name) ? renderers[name]?.() : undefined);
}

export interface GeneratedFile {
  path: string;
  current: string;
  generated: string;
}

/** Each generated file as it is on disk and as the reference says it should be. */
export async function generateDocs(root: string): Promise<GeneratedFile[]> {
  const committed = await readFile(join(root, REFERENCE), "utf8");
  const read = await readResults(join(root, REFERENCE));
  const document: ResultsDocument = { ...read, targets: evaluateTargets(read.groups) };
  const render = renderer(document);
  const files: GeneratedFile[] = [
    { path: REFERENCE, current: committed, generated: `${JSON.stringify(document, null, 2)}\n` },
  ];
  for (const path of DOCS) {
    const current = await readFile(join(root, path), "utf8");
    files.push({ path, current, generated: rewriteRegions(current, path, render) });
  }
  const peers = document.groups.peers as PeerFigures | undefined;
  if (peers) {
    const current = await readFile(join(root, CHART), "utf8").catch(() => "");
    files.push({ path: CHART, current, generated: failoverSvg(peers) });
  }
  return files;
}
