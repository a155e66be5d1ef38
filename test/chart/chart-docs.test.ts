// The chart README documents every value, and nothing that is not one.
import { readFile } from "node:fs/promises";
import { join } from "node:path";
import { expect, it } from "vitest";
import { parse } from "yaml";
import { chartDir } from "../support/kube/chart.ts";

interface Schema {
  properties?: Record<string, Schema>;
}

/** Value paths down to the schema's leaves (objects it describes key by key are walked into). */
function leafPaths(schema: Schema, values: unknown, prefix = ""): string[] {
  if (schema.properties === undefined) return values === undefined ? [] : [prefix];
  return Object.entries(schema.properties).flatMap(([key, sub]) =>
    leafPaths(sub, (values as Record<string, unknown> | undefined)?.[key], prefix ? `${prefix}.${key}` : key),
  );
}

it("lists every value of values.yaml in the README's table, and only those", async () => {
  const schema = JSON.parse(await readFile(join(chartDir, "values.schema.json"), "utf8")) as Schema;
  const values = parse(await readFile(join(chartDir, "values.yaml"), "utf8")) as unknown;
  const readme = await readFile(join(chartDir, "README.md"), "utf8");
  const documented = [...readme.matchAll(/^\|\s*`([a-zA-Z.]+)`\s*\|/gm)].map(([, key]) => key);
  const paths = leafPaths(schema, values);
  expect(paths.length).toBeGreaterThan(90);
  expect([...documented].sort()).toEqual([...paths].sort());
});
