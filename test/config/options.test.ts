// Flags and their environment variables (src/config/options.ts): a flag wins over its variable,
// reading never stops at the first problem, a misspelt flag gets the flag meant and no cascade.
import { describe, expect, it } from "vitest";
import {
  closestName,
  noArguments,
  type OptionSpec,
  optionHelp,
  optionReader,
  readOptions,
  UsageError,
} from "../../src/config/options.ts";
import { parseInteger } from "../../src/config/values.ts";

const SPECS: OptionSpec[] = [
  { flag: "lease", env: "T_LEASE", value: "NAME", repeatable: true, help: "" },
  { flag: "size", env: "T_SIZE", value: "N", help: "" },
  { flag: "json", env: "T_JSON", boolean: true, help: "" },
  { flag: "no-lead", env: "T_NO_LEAD", boolean: true, help: "" },
];

describe("readOptions", () => {
  it("reads --flag value, --flag=value, booleans as --x, --no-x and --x=false, and where each came from", () => {
    const raw = readOptions(SPECS, ["--size", "3", "--lease=a", "--no-json", "--no-lead"], {});
    expect(raw.values).toEqual(
      new Map([
        ["size", { text: "3", source: "--size" }],
        ["lease", { text: "a", source: "--lease" }],
        ["json", { text: "false", source: "--json" }],
        ["no-lead", { text: "true", source: "--no-lead" }],
      ]),
    );
    expect(readOptions(SPECS, ["--json=off"], {}).values.get("json")).toEqual({
      text: "off",
      source: "--json",
    });
    expect(raw.problems).toEqual([]);
  });

  it("a flag wins over its variable; a variable fills in for an absent flag, an empty one does not", () => {
    const raw = readOptions(SPECS, ["--size", "3"], { T_SIZE: "9", T_LEASE: "from-env", T_JSON: "" });
    expect(raw.values.get("size")).toEqual({ text: "3", source: "--size" });
    expect(raw.values.get("lease")).toEqual({ text: "from-env", source: "T_LEASE" });
    expect(raw.values.has("json")).toBe(false);
  });

  it("joins a repeatable flag's values; a single-valued flag given twice keeps the last", () => {
    const raw = readOptions(SPECS, ["--lease", "a", "--lease=b", "--size", "1", "--size", "2"], {
      T_LEASE: "c",
    });
    expect(raw.values.get("lease")).toEqual({ text: "a,b", source: "--lease" });
    expect(raw.values.get("size")).toEqual({ text: "2", source: "--size" });
  });

  it("takes positionals, everything after --, and -h/--help", () => {
    const raw = readOptions(SPECS, ["orders", "-h", "--", "--size", "x"], {});
    expect(raw.positionals).toEqual(["orders", "--size", "x"]);
    expect(raw.help).toBe(true);
    expect(raw.values.size).toBe(0);
  });

  it("collects every problem: a flag without its value, unknown flags, each once", () => {
    const raw = readOptions(SPECS, ["--size", "--frobnicate", "--lease"], {});
    expect(raw.problems).toEqual([
      "--size needs a value (N)",
      "unknown flag --frobnicate; see --help for the flags this command takes",
      "--lease needs a value (NAME)",
    ]);
  });

  it("a misspelt flag gets the flag meant, takes that flag's value along, and nothing cascades", () => {
    const valued = readOptions(SPECS, ["--leese", "orders", "keep"], {});
    expect(valued.problems).toEqual(["unknown flag --leese (did you mean --lease?)"]);
    expect(valued.positionals).toEqual(["keep"]);
    expect(valued.misspelt).toEqual(new Set(["lease"]));
    // A boolean's misspelling takes no value: the next word stays a positional.
    const flag = readOptions(SPECS, ["--jsno", "orders"], {});
    expect(flag.problems).toEqual(["unknown flag --jsno (did you mean --json?)"]);
    expect(flag.positionals).toEqual(["orders"]);
    expect(readOptions(SPECS, ["--no-jsn"], {}).problems).toEqual([
      "unknown flag --no-jsn (did you mean --no-json?)",
    ]);
    expect(readOptions(SPECS, ["--lease=a", "--lese=b"], {}).problems).toEqual([
      "unknown flag --lese (did you mean --lease?)",
    ]);
    // Nothing close: no guess, and the word after it is not swallowed.
    const far = readOptions(SPECS, ["--frobnicate", "orders"], {});
    expect(far.problems).toEqual(["unknown flag --frobnicate; see --help for the flags this command takes"]);
    expect(far.positionals).toEqual(["orders"]);
  });
});

describe("closestName", () => {
  it("guesses within one edit of a short name, a third of a long one; a swap of neighbours is one edit", () => {
    expect(closestName("jsn", ["json", "lease"])).toBe("json");
    expect(closestName("jsno", ["json", "lease"])).toBe("json");
    expect(closestName("renew-intreval", ["renew-interval", "retry-interval"])).toBe("renew-interval");
    expect(closestName("db", ["json", "lease"])).toBeUndefined();
    expect(closestName("x", ["y"])).toBeUndefined();
  });
});

describe("optionReader", () => {
  it("parses a value, or records the problem prefixed with the flag or variable it came from", () => {
    const raw = readOptions(SPECS, ["--size", "0"], { T_LEASE: "x" });
    const problems: string[] = [];
    const get = optionReader(raw, problems);
    expect(get("size", (t) => parseInteger(t, 1, 9))).toBeUndefined();
    expect(get("lease", (t) => parseInteger(t, 1, 9))).toBeUndefined();
    expect(get("json", (t) => parseInteger(t, 1, 9))).toBeUndefined();
    expect(problems).toEqual([
      '--size: "0" must be a whole number from 1 to 9',
      'T_LEASE: "x" must be a whole number from 1 to 9',
    ]);
    expect(get("size", (t) => parseInteger(t, 0, 9))).toBe(0);
  });
});

describe("noArguments", () => {
  it("names the command and the stray words", () => {
    const problems: string[] = [];
    noArguments("run", readOptions(SPECS, ["stray", "two words"], {}), problems);
    noArguments("run", readOptions(SPECS, [], {}), problems);
    expect(problems).toEqual(['pglease run takes no arguments, got "stray" "two words"']);
  });
});

describe("optionHelp", () => {
  it("shows each flag with its value or --no- form, its default and its variable", () => {
    const specs: OptionSpec[] = [
      { flag: "size", env: "T_SIZE", value: "N", help: "connections", defaultText: "4" },
      { flag: "json", boolean: true, help: "print JSON" },
    ];
    expect(optionHelp(specs).split("\n")).toEqual([
      "  --size N           connections (default 4) [T_SIZE]",
      "  --json, --no-json  print JSON",
    ]);
    // A flag that is itself a negation has no --no-no- form.
    expect(optionHelp([SPECS[3] as OptionSpec])).toBe("  --no-lead  [T_NO_LEAD]");
  });
});

describe("UsageError", () => {
  it("carries every problem, one a line, with no stack in its message", () => {
    const error = new UsageError(["first", "second"]);
    expect(error.name).toBe("UsageError");
    expect(error.problems).toEqual(["first", "second"]);
    expect(error.message).toBe("first\nsecond");
  });
});
