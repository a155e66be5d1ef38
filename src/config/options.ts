// Command-line flags with environment-variable equivalents. A flag wins over its variable.
// Reading never stops at the first problem: every one is collected for a single report.
import type { Parsed } from "./values.ts";

export interface OptionSpec {
  /** Flag name without the dashes: `renew-interval`. */
  flag: string;
  /** Environment variable read when the flag is absent. */
  env?: string;
  /** Booleans take `--x` / `--no-x` (or `--x=false`) and no separate value. */
  boolean?: boolean;
  /** May be given more than once; the values are joined with commas. */
  repeatable?: boolean;
  /** Placeholder shown in help, e.g. DURATION. */
  value?: string;
  help: string;
  defaultText?: string;
}

export interface RawValue {
  text: string;
  /** Where the value came from, as the user would write it: `--duration` or `PGLEASE_DURATION`. */
  source: string;
}

export interface RawOptions {
  values: Map<string, RawValue>;
  positionals: string[];
  help: boolean;
  problems: string[];
  /**
   * The flags that misspelt ones were taken for: their own absence is not reported as well
   * (`--leese x` is one mistake, not also a missing --lease).
   */
  misspelt: Set<string>;
}

export function readOptions(
  specs: readonly OptionSpec[],
  argv: readonly string[],
  env: NodeJS.ProcessEnv,
): RawOptions {
  const byFlag = new Map(specs.map((s) => [s.flag, s]));
  const values = new Map<string, RawValue>();
  const positionals: string[] = [];
  const problems: string[] = [];
  const misspelt = new Set<string>();
  let help = false;

  for (let i = 0; i < argv.length; i++) {
    const token = argv[i] ?? "";
    if (token === "--") {
      positionals.push(...argv.slice(i + 1));
      break;
    }
    if (token === "-h" || token === "--help") {
      help = true;
      continue;
    }
    if (!token.startsWith("--")) {
      positionals.push(token);
      continue;
    }
    const eq = token.indexOf("=");
    const name = token.slice(2, eq < 0 ? undefined : eq);
    const negated = name.startsWith("no-") && byFlag.get(name.slice(3))?.boolean === true;
    const spec = byFlag.get(negated ? name.slice(3) : name);
    if (!spec) {
      const meant = closest(name.startsWith("no-") ? name.slice(3) : name, specs);
      if (!meant) {
        problems.push(`unknown flag --${name}; see --help for the flags this command takes`);
        continue;
      }
      const spelt = name.startsWith("no-") && meant.boolean ? `no-${meant.flag}` : meant.flag;
      problems.push(`unknown flag --${name} (did you mean --${spelt}?)`);
      misspelt.add(meant.flag);
      // The word after it is the value of the flag meant, not an argument of its own.
      const next = argv[i + 1];
      if (!meant.boolean && eq < 0 && next !== undefined && !next.startsWith("--")) i++;
      continue;
    }
    let text: string;
    if (spec.boolean) {
      text = negated ? "false" : eq < 0 ? "true" : token.slice(eq + 1);
    } else if (eq >= 0) {
      text = token.slice(eq + 1);
    } else {
      const next = argv[i + 1];
      if (next === undefined || next.startsWith("--")) {
        problems.push(`--${spec.flag} needs a value${spec.value ? ` (${spec.value})` : ""}`);
        continue;
      }
      text = next;
      i++;
    }
    const earlier = values.get(spec.flag);
    if (earlier && earlier.source === `--${spec.flag}` && spec.repeatable) {
      values.set(spec.flag, { text: `${earlier.text},${text}`, source: earlier.source });
    } else {
      values.set(spec.flag, { text, source: `--${spec.flag}` });
    }
  }

  for (const spec of specs) {
    if (values.has(spec.flag) || !spec.env) continue;
    const text = env[spec.env];
    if (text !== undefined && text !== "") values.set(spec.flag, { text, source: spec.env });
  }
  return { values, positionals, help, problems, misspelt };
}

/** The name meant by a misspelt one: the nearest by edit distance, if near enough to be a guess. */
export function closestName(name: string, names: readonly string[]): string | undefined {
  let best: string | undefined;
  let bestDistance = Number.POSITIVE_INFINITY;
  for (const candidate of names) {
    const d = editDistance(name, candidate);
    if (d < bestDistance) {
      best = candidate;
      bestDistance = d;
    }
  }
  // One edit in a short name, up to a third of a long one: `--jsn` is --json, `--db` is nothing.
  const near = bestDistance <= Math.max(1, Math.floor(name.length / 3)) && bestDistance < name.length;
  return near ? best : undefined;
}

function closest(name: string, specs: readonly OptionSpec[]): OptionSpec | undefined {
  const flag = closestName(
    name,
    specs.map((s) => s.flag),
  );
  return specs.find((s) => s.flag === flag);
}

/** Levenshtein distance, with a swap of two neighbours counting as one edit. */
function editDistance(a: string, b: string): number {
  const rows = Array.from({ length: a.length + 1 }, (_, i) =>
    Array.from({ length: b.length + 1 }, (_, j) => (i === 0 ? j : j === 0 ? i : 0)),
  );
  for (let i = 1; i <= a.length; i++) {
    for (let j = 1; j <= b.length; j++) {
      const row = rows[i] as number[];
      const above = rows[i - 1] as number[];
      const cost = a[i - 1] === b[j - 1] ? 0 : 1;
      row[j] = Math.min((above[j] ?? 0) + 1, (row[j - 1] ?? 0) + 1, (above[j - 1] ?? 0) + cost);
      if (i > 1 && j > 1 && a[i - 1] === b[j - 2] && a[i - 2] === b[j - 1]) {
        row[j] = Math.min(row[j] ?? 0, ((rows[i - 2] as number[])[j - 2] ?? 0) + 1);
      }
    }
  }
  return (rows[a.length] as number[])[b.length] ?? 0;
}

/** Parses a flag's value; a problem is recorded with the flag or variable it came from. */
export function optionReader(raw: RawOptions, problems: string[]) {
  return <T>(flag: string, parse: (text: string) => Parsed<T>): T | undefined => {
    const value = raw.values.get(flag);
    if (!value) return undefined;
    const parsed = parse(value.text);
    if ("problem" in parsed) {
      problems.push(`${value.source}: ${parsed.problem}`);
      return undefined;
    }
    return parsed.value;
  };
}

export function noArguments(command: string, raw: RawOptions, problems: string[]): void {
  if (raw.positionals.length > 0) {
    problems.push(
      `pglease ${command} takes no arguments, got ${raw.positionals.map((p) => JSON.stringify(p)).join(" ")}`,
    );
  }
}

export function optionHelp(specs: readonly OptionSpec[]): string {
  const rows = specs.map((s) => {
    // A flag that is itself a negation (--no-lead) has no --no-no- form worth showing.
    const negation = s.flag.startsWith("no-") ? "" : `, --no-${s.flag}`;
    const left = s.boolean ? `--${s.flag}${negation}` : `--${s.flag} ${s.value ?? "VALUE"}`;
    const right = [s.help, s.defaultText ? `(default ${s.defaultText})` : "", s.env ? `[${s.env}]` : ""]
      .filter(Boolean)
      .join(" ");
    return [left, right] as const;
  });
  const width = Math.max(...rows.map(([left]) => left.length)) + 2;
  return rows.map(([left, right]) => `  ${left.padEnd(width)}${right}`).join("\n");
}

export class UsageError extends Error {
  readonly problems: string[];
  constructor(problems: string[]) {
    super(problems.join("\n"));
    this.name = "UsageError";
    this.problems = problems;
  }
}
