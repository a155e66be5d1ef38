// JSON logs (pino) that cannot leak the database password: every line is scrubbed of the
// secrets known at start, in plain and JSON-escaped form, whatever field or stack holds them.
import { Writable } from "node:stream";
import pino from "pino";
import type { LogLevel } from "../config/values.ts";

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

export function scrubbingStream(
  secrets: readonly string[],
  out: NodeJS.WritableStream = process.stdout,
): Writable {
  return new Writable({
    write(chunk: Buffer, _encoding, done) {
      out.write(scrub(chunk.toString("utf8"), secrets));
      done();
    },
  });
}

export function createLogger(
  level: LogLevel,
  secrets: readonly string[],
  out?: NodeJS.WritableStream,
): pino.Logger {
  return pino(
    {
      level,
      base: { service: "pglease" },
      timestamp: pino.stdTimeFunctions.isoTime,
      formatters: { level: (label) => ({ level: label }) },
    },
    scrubbingStream(secrets, out),
  );
}

/** The lease stack's logger interface on a pino logger: message first there, fields first here. */
export function leaseLogger(log: pino.Logger): { info: LeaseLogFn; warn: LeaseLogFn } {
  return {
    info: (message, fields) => log.info(fields ?? {}, message),
    warn: (message, fields) => log.warn(fields ?? {}, message),
  };
}

type LeaseLogFn = (message: string, fields?: Record<string, unknown>) => void;
