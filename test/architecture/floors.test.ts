// The floors of src/ (scripts/check-floors.ts): the tree as it stands keeps them, and the check
// does catch what breaks them, an import from above, one from beside, a folder with no floor.
import { describe, expect, it } from "vitest";
import { FLOORS, floorProblems, importsOf, readSources, SRC } from "../../scripts/check-floors.ts";

it("src/ keeps its floors: no folder imports one above or beside it", () => {
  expect(floorProblems(readSources(SRC))).toEqual([]);
});

it("every folder of src/ stands on a floor, and only once", () => {
  const listed = FLOORS.flat();
  expect(new Set(listed).size).toBe(listed.length);
  const folders = new Set([...readSources(SRC).keys()].map((p) => (p.includes("/") ? p.split("/")[0] : ".")));
  expect([...folders].sort()).toEqual([...listed].sort());
});

describe("the check", () => {
  const floors = [["shared"], ["election"], ["postgres", "fence"], ["."]];

  it("reads static, re-exported, multi-line and dynamic imports, and no package's", () => {
    const text = [
      'import type { Clock } from "../shared/clock.ts";',
      "import {",
      "  a,",
      "  b,",
      '} from "./a.ts";',
      'export { c } from "../postgres/c.ts";',
      'import "./side-effect.ts";',
      'const m = await import(\n  "../fence/guard.ts"\n);',
      'import pg from "pg";',
      '// import { x } from "../not/read.ts";',
    ].join("\n");
    expect(importsOf(text).sort()).toEqual(
      ["../fence/guard.ts", "../postgres/c.ts", "../shared/clock.ts", "./a.ts", "./side-effect.ts"].sort(),
    );
  });

  it("passes imports of the own folder and of the floors below", () => {
    const files = new Map([
      ["postgres/store.ts", 'import { a } from "./table.ts";\nimport { b } from "../election/ports.ts";'],
      ["election/elector.ts", 'import type { Clock } from "../shared/clock.ts";'],
      ["index.ts", 'export { c } from "./postgres/store.ts";'],
    ]);
    expect(floorProblems(files, floors)).toEqual([]);
  });

  it("fails an import from a floor above, and one from beside (half of a folder cycle)", () => {
    const files = new Map([
      ["shared/clock.ts", 'import { Elector } from "../election/elector.ts";'],
      ["fence/guard.ts", 'import { inTransaction } from "../postgres/transaction.ts";'],
    ]);
    expect(floorProblems(files, floors)).toEqual([
      "src/shared/clock.ts imports src/election/elector.ts: src/election/ (floor 2) is above src/shared/ (floor 1)",
      "src/fence/guard.ts imports src/postgres/transaction.ts: src/postgres/ (floor 3) is beside src/fence/ (floor 3)",
    ]);
  });

  it("fails a folder that stands on no floor, once", () => {
    const files = new Map([
      ["extra/a.ts", 'import { b } from "../shared/b.ts";'],
      ["extra/b.ts", ""],
    ]);
    expect(floorProblems(files, floors)).toEqual(["src/extra/ stands on no floor: give it one in FLOORS"]);
  });
});
