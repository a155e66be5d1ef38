// JSON logs that cannot leak the database password: one line per call, in the format pino wrote
// (users' log pipelines parse it), every line scrubbed of the secrets known at start, in plain
// and JSON-escaped form, whatever field or stack holds them. A log reader that falls far behind
// costs lines, counted, not memory.
import type { Writable } from "node:stream";
import type { LogLevel } from "../config/values.ts";
import type { LogFn, Logger } from "../shared/logger.ts";

type Method = Exclude<LogLevel, "silent">;

/** Where the lines go: stdout, or a test's collector. */
export interface LogSink {
  write(line: string): unknown;
  /** What a Writable holds that the OS has not taken yet, in bytes: see MAX_QUEUED_BYTES. */
  readonly writableLength?: number;
}

/**
 * With this much of stdout queued (its reader, the runtime's log shim, behind), a line below warn
 * is dropped and counted instead of queued, so a stalled reader cannot grow the sidecar's memory
 * without bound; the count goes out in a line of its own ahead of the next line written. Some
 * 3,000 lines: far more than a reader that is merely slow leaves queued.
 */
export const MAX_QUEUED_BYTES = 1024 * 1024;

/**
 * Warnings and errors are dropped only past twice that: the lines an exit writes (why the sidecar
 * stopped) are warn or error, and are the ones its bounded flush is for.
 */
const MAX_QUEUED_BYTES_WARN = 2 * MAX_QUEUED_BYTES;

/** pino's level numbers: a logger writes the calls at or above its level; "silent" none. */
const LEVELS: Record<Method, number> = { trace: 10, debug: 20, info: 30, warn: 40, error: 50, fatal: 60 };

/** The text pino's safe-stable-stringify wrote when a field could not be written at all. */
const UNSERIALIZABLE = '"[unable to serialize, circular reference is too complex to analyze]"';

/** The secret strings found in the environment: database password and full URL. */
export function secretsFrom(env: NodeJS.ProcessEnv): string[] {
  const secrets: string[] = [];
  if (env.PGPASSWORD) secrets.push(env.PGPASSWORD);
  if (env.DATABASE_URL) {
    secrets.push(env.DATABASE_URL);
    try {
      const password = decodeURIComponent(new URL(env.DATABASE_URL).password);
      if (password) secrets.push(password, encodeURIComponent(password));
    } catch {
      // An unparsable URL is reported by the config check; the whole string is still scrubbed.
    }
  }
  // Longest first, so a URL is replaced whole before the password inside it.
  return [...new Set(secrets.filter((s) => s.length >= 3))].sort((a, b) => b.length - a.length);
}

export function scrub(text: string, secrets: readonly string[]): string {
  let out = text;
  for (const secret of secrets) {
    for (const form of [secret, JSON.stringify(secret).slice(1, -1)]) out = out.split(form).join("***");
  }
  return out;
}

/**
 * `{"level":"info","time":"<ISO>","service":"pglease",<bindings>,<fields>,"msg":"…"}` per call at
 * or above `level`, scrubbed of `secrets`, to `out` (stdout by default).
 */
export function createLogger(
  level: LogLevel,
  secrets: readonly string[],
  out: LogSink = process.stdout,
): Logger {
  const threshold = level === "silent" ? Number.POSITIVE_INFINITY : LEVELS[level];
  const root = fieldsJson({ service: "pglease" });
  let dropped = 0;
  // The count goes out with the root's bindings: the lines it counts came from every logger, not
  // from the child whose line happens to come next.
  const write = (level: Method, text: string) => {
    const bound = LEVELS[level] >= LEVELS.warn ? MAX_QUEUED_BYTES_WARN : MAX_QUEUED_BYTES;
    if ((out.writableLength ?? 0) >= bound) {
      dropped++;
      return;
    }
    if (dropped > 0) {
      const why = `${dropped} log lines dropped: stdout had ${MAX_QUEUED_BYTES} bytes queued for a reader that was behind`;
      out.write(scrub(line("warn", root, { dropped }, why), secrets));
      dropped = 0;
    }
    out.write(text);
  };
  const loggerWith = (bindings: string): Logger => {
    const method = (name: Method): LogFn =>
      LEVELS[name] < threshold
        ? () => {}
        : (first: string | object, message?: string) => {
            write(name, scrub(line(name, bindings, first, message), secrets));
          };
    return {
      fatal: method("fatal"),
      error: method("error"),
      warn: method("warn"),
      info: method("info"),
      debug: method("debug"),
      trace: method("trace"),
      child: (more) => loggerWith(bindings + fieldsJson(more)),
    };
  };
  return loggerWith(root);
}

/**
 * Resolves true once `out` has handed the OS every line written before the call, false if that
 * takes longer than `withinMs`: for an exit, which drops what is still queued, but must not wait
 * on a log reader that has stalled.
 */
export function flushed(out: Writable, withinMs: number): Promise<boolean> {
  if (out.writableLength === 0) return Promise.resolve(true);
  return new Promise((resolve) => {
    const timer = setTimeout(() => resolve(false), withinMs);
    // Writes complete in order: an empty one's callback comes once all before it went out (or
    // the stream failed, and nothing more will).
    out.write("", () => {
      clearTimeout(timer);
      resolve(true);
    });
  });
}

function line(level: Method, bindings: string, first: string | object, message?: string): string {
  // pino's rule: an error passed in place of the fields is the line's err.
  const fields = typeof first === "string" ? undefined : first instanceof Error ? { err: first } : first;
  const msg = typeof first === "string" ? first : (message ?? lentMessage(fields));
  let text = `{"level":"${level}","time":"${new Date().toISOString()}"${bindings}`;
  if (fields) text += fieldsJson(fields);
  const msgJson = valueJson("msg", msg);
  if (msgJson !== undefined) text += `,"msg":${msgJson}`;
  return `${text}}\n`;
}

/** pino's rule: an error without a message of the call's own lends it its message; none if it cannot be read. */
function lentMessage(fields: object | null | undefined): unknown {
  try {
    const { msg, err } = (fields ?? {}) as { msg?: unknown; err?: { message?: unknown } };
    return msg === undefined && err ? err.message : undefined;
  } catch {
    return undefined;
  }
}

/**
 * `,"key":value` per field, in the object's order; a field JSON has no form for (undefined, a
 * function) is left out. A field whose getter throws is written as unserializable, and an object
 * whose keys cannot be listed (a Proxy that throws) adds none: the line is still written.
 */
function fieldsJson(fields: object): string {
  let keys: string[] = [];
  try {
    keys = Object.keys(fields);
  } catch {
    // Nothing of this object can be written; the rest of the line can.
  }
  let text = "";
  for (const key of keys) {
    let json: string | undefined = UNSERIALIZABLE;
    try {
      json = valueJson(key, (fields as Record<string, unknown>)[key]);
    } catch {
      // The getter threw: its value is unknown, its key still says the field was there.
    }
    if (json !== undefined) text += `,${JSON.stringify(key)}:${json}`;
  }
  return text;
}

/** One field's JSON; never throws, so a field the sidecar did not foresee cannot crash it. */
function valueJson(key: string, value: unknown): string | undefined {
  let v = value;
  try {
    if (key === "err") v = serializeError(value, new Set());
    return JSON.stringify(v);
  } catch {
    try {
      return JSON.stringify(v, safeReplacer());
    } catch {
      return UNSERIALIZABLE;
    }
  }
}

/** A circular reference as "[Circular]" and a BigInt as a JSON number, as pino's fallback wrote them. */
function safeReplacer(): (this: unknown, key: string, value: unknown) => unknown {
  const ancestors: unknown[] = [];
  return function (this: unknown, _key, value) {
    if (typeof value === "bigint") return (JSON as unknown as RawJson).rawJSON(value.toString());
    if (typeof value !== "object" || value === null) return value;
    // `this` is the object holding `value`: what is not on the path to it is done with.
    while (ancestors.length > 0 && ancestors.at(-1) !== this) ancestors.pop();
    if (ancestors.includes(value)) return "[Circular]";
    ancestors.push(value);
    return value;
  };
}

/** JSON.rawJSON (Node 21+), not yet in TypeScript's ES2023 library. */
interface RawJson {
  rawJSON(text: string): unknown;
}

type ErrorLike = { message: string } & Record<string, unknown>;

const isErrorLike = (value: unknown): value is ErrorLike =>
  typeof value === "object" && value !== null && typeof (value as { message?: unknown }).message === "string";

/**
 * An `err` field as pino-std-serializers wrote it: type, message and stack with their causes'
 * folded in, then the error's own enumerable fields (code, errno, …); an error among them is
 * written the same way unless it is a cause (already in message and stack) or one being written.
 */
function serializeError(err: unknown, writing: Set<object>): unknown {
  if (!isErrorLike(err)) return err;
  writing.add(err);
  const out: Record<string, unknown> = {
    type:
      Object.prototype.toString.call(err.constructor) === "[object Function]"
        ? err.constructor.name
        : err.name,
    message: withCauses(err, (e) => e.message, ": ", ": ..."),
    stack: withCauses(err, (e) => `${e.stack || ""}`, "\ncaused by: ", "\ncauses have become circular..."),
  };
  if (Array.isArray(err.errors)) out.aggregateErrors = err.errors.map((e) => serializeError(e, writing));
  for (const key in err) {
    if (out[key] !== undefined) continue;
    const value = err[key];
    if (!isErrorLike(value)) out[key] = value;
    else if (key !== "cause" && !writing.has(value)) out[key] = serializeError(value, writing);
  }
  writing.delete(err);
  return out;
}

/** One part of an error and of each of its causes in turn, joined; a cause met twice ends the chain. */
function withCauses(err: ErrorLike, part: (e: ErrorLike) => string, joint: string, loop: string): string {
  const seen = new Set<ErrorLike>();
  let text = "";
  for (let e = err; ; ) {
    text += part(e);
    if (seen.has(e)) return text + loop;
    const cause = e.cause;
    if (!isErrorLike(cause)) return text;
    seen.add(e);
    text += joint;
    e = cause;
  }
}

/** The lease stack's logger interface on ours: message first there, fields first here. */
export function leaseLogger(log: Logger): { info: LeaseLogFn; warn: LeaseLogFn } {
  return {
    info: (message, fields) => log.info(fields ?? {}, message),
    warn: (message, fields) => log.warn(fields ?? {}, message),
  };
}

type LeaseLogFn = (message: string, fields?: Record<string, unknown>) => void;
