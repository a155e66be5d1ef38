// docs/reference.md held to the code's own definitions: each command's --help as the command
// prints it (generated: npm run docs:reference), the flag table of `pglease run` to RUN_OPTIONS
// (each flag and its variable), the metrics table to what SidecarMetrics registers (each name and
// its labels). A flag or metric added, renamed or dropped in one place and not the other fails
// here, naming it.
import client from "prom-client";
import { describe, expect, it } from "vitest";
import { COMMANDS, helpRegions, REFERENCE_PAGE, withHelp } from "../../scripts/docs-reference.ts";
import { RUN_OPTIONS } from "../../src/config/run-options.ts";
import { SidecarMetrics } from "../../src/observability/metrics.ts";
import { readPage } from "./markdown.ts";

/** The rows of the first table after `heading`, each a list of cells. */
async function tableAfter(heading: string): Promise<string[][]> {
  const page = await readPage("docs/reference.md");
  const at = page.indexOf(`\n${heading}\n`);
  if (at < 0) throw new Error(`docs/reference.md: no heading ${heading}`);
  const lines = page.slice(at).split("\n");
  const first = lines.findIndex((l) => l.startsWith("|"));
  const rows = [];
  for (const line of lines.slice(first + 2)) {
    if (!line.startsWith("|")) break;
    rows.push(
      line
        .slice(1, -1)
        .split(/(?<!\\)\|/)
        .map((cell) => cell.trim()),
    );
  }
  return rows;
}

const codeSpans = (cell: string) => [...cell.matchAll(/`([^`]+)`/g)].map((m) => m[1] as string);

describe("every command's --help in docs/reference.md", () => {
  it("is what the command prints, for every command", async () => {
    const page = await readPage(REFERENCE_PAGE);
    expect(helpRegions(page)).toEqual(COMMANDS);
    expect(page === withHelp(page), "docs/reference.md is stale: run npm run docs:reference").toBe(true);
  });
});

describe("the flags of pglease run in docs/reference.md", () => {
  it("list every flag of RUN_OPTIONS with its variable, and no other", async () => {
    const rows = await tableAfter("### `pglease run`");
    const documented = new Map<string, string>(); // flag → the variable cell of its row
    for (const [flags = "", variables = ""] of rows) {
      const named = codeSpans(flags).flatMap(
        (span) => /^--([a-z][a-z-]*[a-z])(?![a-z…-])/.exec(span)?.[1] ?? [],
      );
      // `--x` / `--no-x` (or `--no-…`) is one boolean flag; `--no-lead` alone is a flag of its own.
      for (const flag of named) {
        if (!(flag.startsWith("no-") && named.includes(flag.slice(3)))) documented.set(flag, variables);
      }
    }
    expect([...documented.keys()].sort()).toEqual(RUN_OPTIONS.map((o) => o.flag).sort());
    for (const option of RUN_OPTIONS) {
      if (option.env === undefined) continue;
      // A shared row may abbreviate its variables: PGLEASE_…_ANNOTATION.
      const named = codeSpans(documented.get(option.flag) ?? "").flatMap((s) => s.split(/,\s*/));
      const matches = named.some((v) =>
        new RegExp(`^${v.replace(/…/g, "[A-Z_]+")}$`).test(option.env as string),
      );
      expect(matches, `--${option.flag}: its variable ${option.env} is not in its row`).toBe(true);
    }
  });
});

describe("the metrics in docs/reference.md", () => {
  it("list every metric SidecarMetrics registers, with its labels, and no other", async () => {
    const metrics = new SidecarMetrics({ version: "docs" }, ["k"]);
    metrics.watchHealth("pod", () => ({ ready: true, handovers: 0 }));
    const processMetrics = new client.Registry();
    client.collectDefaultMetrics({ register: processMetrics });
    const defaults = new Set((await processMetrics.getMetricsAsJSON()).map((m) => m.name));
    const registered = (await metrics.registry.getMetricsAsJSON())
      .map((m) => m.name)
      .filter((name) => !defaults.has(name));

    const rows = await tableAfter("## Metrics");
    const documented = new Map(
      rows.map(([name = "", , labels = ""]) => [codeSpans(name)[0] ?? name, labels]),
    );
    expect([...documented.keys()].sort()).toEqual(registered.sort());
    for (const name of registered) {
      const metric = metrics.registry.getSingleMetric(name) as unknown as { labelNames: string[] };
      const labels = codeSpans(documented.get(name) ?? "");
      for (const label of metric.labelNames) {
        expect(labels, `${name}: the label ${label} is not in its row`).toContain(label);
      }
    }
  });
});
