// Parsers for the value kinds the CLI accepts. Each returns the value or a phrase saying
// what is allowed, which the caller prefixes with the flag or variable it came from.

export type Parsed<T> = { value: T } | { problem: string };

const DURATION = /^(\d+(?:\.\d+)?)(ms|s|m|h|d)$/;
const UNIT_MS: Record<string, number> = { ms: 1, s: 1_000, m: 60_000, h: 3_600_000, d: 86_400_000 };

export function parseDuration(text: string): Parsed<number> {
  const match = DURATION.exec(text.trim());
  if (!match?.[1] || !match[2]) {
    return {
      problem: `${JSON.stringify(text)} is not a duration; use a number with a unit: 500ms, 15s, 1m, 2h, 30d`,
    };
  }
  const ms = Number(match[1]) * (UNIT_MS[match[2]] ?? 0);
  if (!Number.isSafeInteger(ms) || ms <= 0) {
    return { problem: `${JSON.stringify(text)} must be a positive whole number of milliseconds` };
  }
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
