// The figures of docs/performance.md and docs/operations.md come from the committed
// reference results alone (npm run bench:docs): this fails when a page, the chart or the reference's
// target verdicts differ from what the reference gives, and when prose outside the generated
// regions holds a measured-looking figure. No bench runs here.
import { readFile } from "node:fs/promises";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { generateDocs } from "../../bench/docs/generate.ts";
import { regionNames, rewriteRegions } from "../../bench/docs/markers.ts";
import { figureAt } from "../../bench/figures.ts";
import { mergeResults, type ResultsDocument, type RunInfo } from "../../bench/results.ts";
import { evaluateTargets, type TargetSpec } from "../../bench/targets.ts";
import { repoRoot } from "../support/kube/chart.ts";

describe("the committed docs", () => {
  it("are what npm run bench:docs makes of bench/reference/results.json", async () => {
    const files = await generateDocs(repoRoot);
    expect(files.map((f) => f.path)).toEqual([
      "bench/reference/results.json",
      "docs/performance.md",
      "docs/operations.md",
      "bench/reference/failover.svg",
    ]);
    for (const file of files) {
      // One line of context is enough to find it; the fix is always the same command.
      expect(file.current === file.generated, `${file.path} is stale: run npm run bench:docs`).toBe(true);
    }
  });

  // Ratios, memory, shares, sub-second latencies and counts of requests or statements are measured;
  // the periods prose names ("a 15 s lease") are settings.
  const MEASURED = /\d+(\.\d+)?\s?(×|MB|%)|\d+\.\d+\s?ms\b|\d[\d,]*\s(requests|statements|claims)\b/g;

  it("hold no measured figure outside the generated regions", async () => {
    const file = "docs/performance.md";
    const text = await readFile(join(repoRoot, file), "utf8");
    const prose = rewriteRegions(text, file, () => "");
    expect(prose.match(MEASURED) ?? [], `${file}: put these figures in a bench region`).toEqual([]);
    expect(regionNames(text, file).length).toBeGreaterThan(3);
  });
});

describe("marked regions", () => {
  const render = (name: string) => ({ a: "one", b: "two\nlines" })[name];

  it("rewrites blocks on lines of their own and inline regions within the sentence", () => {
    const text = "x <!-- bench:a -->old<!-- /bench:a --> y\n<!-- bench:b -->\nstale\n<!-- /bench:b -->\n";
    expect(rewriteRegions(text, "f.md", render)).toBe(
      "x <!-- bench:a -->one<!-- /bench:a --> y\n<!-- bench:b -->\ntwo\nlines\n<!-- /bench:b -->\n",
    );
  });

  it("refuses an unknown name, an unclosed region and a marker inside a region, naming the line", () => {
    expect(() => rewriteRegions("\n<!-- bench:c --><!-- /bench:c -->", "f.md", render)).toThrow(
      "f.md:2: no generator for the region c",
    );
    expect(() => rewriteRegions("<!-- bench:a -->", "f.md", render)).toThrow("f.md:1: a is not closed");
    expect(() => rewriteRegions("<!-- bench:a --><!-- bench:b --><!-- /bench:a -->", "f.md", render)).toThrow(
      "a marker inside the region a",
    );
  });
});

describe("figures and targets", () => {
  const groups = {
    peers: {
      series: [
        { event: "crash", system: "pglease", p99Ms: 12 },
        { event: "graceful", system: "pglease", p99Ms: 200 },
      ],
    },
    scale: { electors: [{ leases: 10000, allLeading: false }] },
  };

  it("reads a figure by path, selecting array elements by their fields", () => {
    expect(figureAt(groups, "peers.series[event=graceful][system=pglease].p99Ms")).toBe(200);
    expect(figureAt(groups, "scale.electors[leases=10000].allLeading")).toBe(false);
    expect(figureAt(groups, "peers.series[event=crash][system=client-go].p99Ms")).toBeUndefined();
    expect(figureAt(groups, "footprint.cli")).toBeUndefined();
    expect(() => figureAt(groups, "peers.series[event].p99Ms")).toThrow("is not [key=value]");
  });

  it("judges each target met, not met, or not measured", () => {
    const spec = (
      id: string,
      figure: string,
      op: TargetSpec["op"],
      threshold: number | boolean,
    ): TargetSpec => ({
      id,
      target: id,
      figure,
      unit: "ms",
      op,
      threshold,
    });
    const verdicts = evaluateTargets(groups, [
      spec("crash", "peers.series[event=crash][system=pglease].p99Ms", "<=", 12),
      spec("graceful", "peers.series[event=graceful][system=pglease].p99Ms", "<", 150),
      spec("leading", "scale.electors[leases=10000].allLeading", "==", true),
      spec("absent", "peers.series[event=crash][system=client-go].p99Ms", "<", 1),
    ]);
    expect(verdicts.map((v) => [v.id, v.measured, v.verdict])).toEqual([
      ["crash", 12, "met"],
      ["graceful", 200, "not met"],
      ["leading", false, "not met"],
      ["absent", null, "not measured"],
    ]);
  });
});

describe("merging results", () => {
  const run = (groups: string[], startedAt: string): RunInfo =>
    ({ startedAt, finishedAt: startedAt, mode: "full", command: "c", groups }) as RunInfo;
  const table = (group: string) => ({ group, title: group, columns: [], rows: [], notes: [] });
  const document = (runs: RunInfo[], groups: Record<string, unknown>): ResultsDocument => ({
    schemaVersion: 2,
    runs,
    groups,
    tables: Object.keys(groups).map(table),
    targets: [],
  });

  it("replaces only the groups run again, keeps each group's run, and judges the targets again", () => {
    const old = document([run(["scale", "peers"], "t1")], { scale: { n: 1 }, peers: { n: 1 } });
    const fresh = document([run(["peers"], "t2")], {
      peers: { series: [{ event: "crash", system: "pglease", expiryToClaim: { p99Ms: 5 } }] },
    });
    const merged = mergeResults(old, fresh, ["scale", "peers"]);
    expect(Object.keys(merged.groups)).toEqual(["scale", "peers"]);
    expect(merged.groups.scale).toEqual({ n: 1 });
    expect(merged.runs.map((r) => [r.startedAt, r.groups])).toEqual([
      ["t1", ["scale"]],
      ["t2", ["peers"]],
    ]);
    expect(merged.tables.map((t) => t.group)).toEqual(["scale", "peers"]);
    expect(merged.targets.find((t) => t.id === "crash-claim-after-expiry")?.verdict).toBe("met");
  });
});
