// The flags of `pglease run` (src/config/run-options.ts) as a user meets them in --help and in
// the chart's environment: one variable each, named after the flag, and each default said once.
import { describe, expect, it } from "vitest";
import { optionHelp } from "../../src/config/options.ts";
import { RUN_OPTIONS } from "../../src/config/run-options.ts";

describe("RUN_OPTIONS", () => {
  it("every flag has its variable, PGLEASE_ and the flag in capitals", () => {
    for (const spec of RUN_OPTIONS) {
      expect(spec.env, spec.flag).toBe(`PGLEASE_${spec.flag.toUpperCase().replaceAll("-", "_")}`);
    }
  });

  it("no flag or variable is defined twice", () => {
    const flags = RUN_OPTIONS.map((s) => s.flag);
    expect(new Set(flags).size).toBe(flags.length);
  });

  it("a flag that takes a value shows what kind; a boolean shows none; each says what it does", () => {
    for (const spec of RUN_OPTIONS) {
      expect(spec.help.length, spec.flag).toBeGreaterThan(10);
      if (spec.boolean) expect(spec.value, spec.flag).toBeUndefined();
      else expect(spec.value, spec.flag).toMatch(/^[A-Z]|\|/);
    }
  });

  it("only lists repeat: the leases and the application's containers", () => {
    expect(RUN_OPTIONS.filter((s) => s.repeatable).map((s) => s.flag)).toEqual(["lease", "app-containers"]);
  });

  it("help states each default once, and a boolean's --no- form only in its left column", () => {
    for (const line of optionHelp(RUN_OPTIONS).split("\n")) {
      expect(line.match(/\bdefault\b/g)?.length ?? 0, line).toBeLessThanOrEqual(1);
      expect(line.match(/--no-[a-z-]+/g)?.length ?? 0, line).toBeLessThanOrEqual(1);
      expect(line, line).not.toMatch(/\(default [^)]*\(/);
    }
  });
});
