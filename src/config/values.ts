// Parsers for the value kinds the CLI accepts. Each returns the value or a phrase saying
// what is allowed, which the caller prefixes with the flag or variable it came from.

export type Parsed<T> = { value: T } | { problem: string };

// Go's time.ParseDuration syntax (1h, 1m30s, 1.5s, 300ms, 2h45m), plus d for days, without a
// sign: one or more numbers, each with its unit. The chart's values.schema.json and its
// durationMillis template accept the same (test/chart checks the schema against this pattern).
export const DURATION_PATTERN = "^((\\d+(\\.\\d*)?|\\.\\d+)(ms|s|m|h|d))+$";
const DURATION = new RegExp(DURATION_PATTERN);
const PART = /(\d*)(?:\.(\d*))?(ms|s|m|h|d)/g;
const UNIT_MS: Record<string, bigint> = {
  ms: 1n,
  s: 1_000n,
  m: 60_000n,
  h: 3_600_000n,
  d: 86_400_000n,
};
const DURATION_EXAMPLES = "500ms, 15s, 1m30s, 1.5h, 30d";

export function parseDuration(text: string): Parsed<number> {
  const trimmed = text.trim();
  if (!DURATION.test(trimmed)) {
    return {
      problem: `${JSON.stringify(text)} is not a duration; write a number and a unit, or several as Go does: ${DURATION_EXAMPLES}`,
    };
  }
  // Exact decimal arithmetic: 1.1s is 1100 ms, not 1100.0000000000002.
  let numerator = 0n;
  let denominator = 1n;
  for (const [, whole = "", fraction = "", unit = ""] of trimmed.matchAll(PART)) {
    const scale = 10n ** BigInt(fraction.length);
    const part = BigInt(`${whole}${fraction}` || "0") * (UNIT_MS[unit] ?? 0n);
    numerator = numerator * scale + part * denominator;
    denominator *= scale;
  }
  if (numerator % denominator !== 0n) {
    return {
      problem: `${JSON.stringify(text)} is not a whole number of milliseconds; pglease counts time in milliseconds`,
    };
  }
  const ms = Number(numerator / denominator);
  if (ms <= 0) return { problem: `${JSON.stringify(text)} must be longer than zero` };
  if (!Number.isSafeInteger(ms)) return { problem: `${JSON.stringify(text)} is too long` };
  return { value: ms };
}

export function parseBoolean(text: string): Parsed<boolean> {
  const t = text.trim().toLowerCase();
  if (["true", "1", "yes", "on"].includes(t)) return { value: true };
  if (["false", "0", "no", "off"].includes(t)) return { value: false };
  return { problem: `${JSON.stringify(text)} is not a boolean; use true or false` };
}

export function parseInteger(text: string, min: number, max: number): Parsed<number> {
  const n = Number(text);
  if (!/^\d+$/.test(text.trim()) || !Number.isSafeInteger(n) || n < min || n > max) {
    return { problem: `${JSON.stringify(text)} must be a whole number from ${min} to ${max}` };
  }
  return { value: n };
}

export interface Address {
  host: string;
  port: number;
}

export function parseAddress(text: string): Parsed<Address> {
  const at = text.lastIndexOf(":");
  // ":port" listens on every address, IPv6 and IPv4 (dual-stack), as the default does.
  const host = at <= 0 ? "::" : text.slice(0, at).replace(/^\[(.*)\]$/, "$1");
  const port = Number(text.slice(at + 1));
  if (at < 0 || !/^\d+$/.test(text.slice(at + 1)) || port > 65_535) {
    return {
      problem: `${JSON.stringify(text)} is not an address; use host:port or :port, e.g. :8484, [::]:8484, 0.0.0.0:8484 or 127.0.0.1:0`,
    };
  }
  return { value: { host, port } };
}

export const LOG_LEVELS = ["fatal", "error", "warn", "info", "debug", "trace", "silent"] as const;
export type LogLevel = (typeof LOG_LEVELS)[number];

export function parseLogLevel(text: string): Parsed<LogLevel> {
  const t = text.trim().toLowerCase();
  return (LOG_LEVELS as readonly string[]).includes(t)
    ? { value: t as LogLevel }
    : { problem: `${JSON.stringify(text)} is not a log level; use one of ${LOG_LEVELS.join(", ")}` };
}

const LEASE_NAME = /^[\p{L}\p{N}][\p{L}\p{N}._:/-]{0,199}$/u;

export function parseLeaseNames(text: string): Parsed<string[]> {
  const names = text
    .split(",")
    .map((n) => n.trim())
    .filter((n) => n !== "");
  if (names.length === 0) return { problem: "names no lease; give at least one, e.g. orders-sync" };
  const bad = names.filter((n) => !LEASE_NAME.test(n));
  if (bad.length > 0) {
    return {
      problem: `${bad.map((n) => JSON.stringify(n)).join(", ")} ${bad.length === 1 ? "is not a lease name" : "are not lease names"}; use letters, digits and . _ : / - (at most 200 characters, starting with a letter or digit)`,
    };
  }
  const duplicate = names.find((n, i) => names.indexOf(n) !== i);
  if (duplicate) return { problem: `names lease ${JSON.stringify(duplicate)} twice` };
  return { value: names };
}
