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
      problems.push(`unknown flag --${name}; see --help for the flags this command takes`);
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
  return { values, positionals, help, problems };
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
    const left = s.boolean ? `--${s.flag}, --no-${s.flag}` : `--${s.flag} ${s.value ?? "VALUE"}`;
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
