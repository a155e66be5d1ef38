// The sidecar's JSON lines, byte for byte: users' log pipelines parse them, so the format pino
// wrote (level label, ISO time, service, bindings, fields, msg; pino-std-serializers' `err`) is a
// contract. The expected lines were written by pino 10.4 through the createLogger it backed.
import { afterEach, beforeEach, expect, it, vi } from "vitest";
import type { LogLevel } from "../../src/config/values.ts";
import { createLogger } from "../../src/observability/logger.ts";

const NOW = new Date("2026-12-02T04:30:05.123Z");

beforeEach(() => {
  vi.useFakeTimers({ toFake: ["Date"] });
  vi.setSystemTime(NOW);
});
afterEach(() => vi.useRealTimers());

function collect(level: LogLevel, secrets: string[] = []) {
  const lines: string[] = [];
  const logger = createLogger(level, secrets, { write: (line: string) => lines.push(line) });
  return { logger, lines };
}

/** An error whose stack names no path of this machine. */
function error(message: string, fields: Record<string, unknown> = {}, options?: ErrorOptions): Error {
  const e = Object.assign(new Error(message, options), fields);
  e.stack = `Error: ${message}\n    at connect (pg/client.js:1:1)`;
  return e;
}

class PodApiError extends Error {
  readonly status = 422;
}

it("writes the lines pino wrote: key order, bindings, fields, errors, escapes, every level", () => {
  const { logger, lines } = collect("trace");
  logger.info("started");
  logger.info({ lease: "orders", fence: 3, leader: true, took: 1.5 }, "became leader");
  const publisher = logger.child({ holder: "orders-7d9f-abc" }).child({ component: "publisher", n: 2 });
  publisher.warn({ failures: 2, err: "HTTP 503" }, "pod publishing failed; retrying with backoff");
  publisher.error(
    { err: error("connect ECONNREFUSED 10.0.0.1:5432", { code: "ECONNREFUSED", errno: -111 }), failures: 1 },
    "pod publishing failed unexpectedly; retrying",
  );
  const inner = error("socket hang up", { code: "ECONNRESET" });
  logger.error({ err: error("lease store unreachable", {}, { cause: inner }) }, "renewal failed");
  logger.error({ err: Object.assign(error("bad pod"), { cause: "a string cause" }) });
  const api = new PodApiError("pod is invalid");
  api.stack = "PodApiError: pod is invalid\n    at patch (kube/api.js:2:2)";
  logger.error({
    err: api,
    details: { field: "metadata.labels", causes: [{ reason: "FieldValueInvalid" }] },
  });
  logger.debug(
    {
      pod: { name: "orders-0", labels: { role: "leader", "pglease.io/fence": "3" } },
      list: [1, "two", null, {}],
    },
    "nested",
  );
  logger.info({ quote: 'say "hi"', path: "C:\\tmp", line: "a\nb\tc", bell: "\u0007", wide: "é ✓ 🚀 \u2028" });
  logger.info(`${"x".repeat(100)} "quoted" and \\ long`);
  logger.info('message with "quotes", a \\ and a\nnewline');
  logger.info(
    { gone: undefined, fn: () => 1, nan: Number.NaN, inf: Number.POSITIVE_INFINITY, none: null },
    "dropped",
  );
  logger.info({ at: new Date(0), msg: "a field named msg" }, "and a message");
  logger.info({ only: "fields" });
  logger.fatal("fatal");
  logger.error("error");
  logger.warn("warn");
  logger.debug("debug");
  logger.trace("trace");
  expect(lines).toEqual([
    '{"level":"info","time":"2026-12-02T04:30:05.123Z","service":"pglease","msg":"started"}\n',
    '{"level":"info","time":"2026-12-02T04:30:05.123Z","service":"pglease","lease":"orders","fence":3,"leader":true,"took":1.5,"msg":"became leader"}\n',
    '{"level":"warn","time":"2026-12-02T04:30:05.123Z","service":"pglease","holder":"orders-7d9f-abc","component":"publisher","n":2,"failures":2,"err":"HTTP 503","msg":"pod publishing failed; retrying with backoff"}\n',
    '{"level":"error","time":"2026-12-02T04:30:05.123Z","service":"pglease","holder":"orders-7d9f-abc","component":"publisher","n":2,"err":{"type":"Error","message":"connect ECONNREFUSED 10.0.0.1:5432","stack":"Error: connect ECONNREFUSED 10.0.0.1:5432\\n    at connect (pg/client.js:1:1)","code":"ECONNREFUSED","errno":-111},"failures":1,"msg":"pod publishing failed unexpectedly; retrying"}\n',
    '{"level":"error","time":"2026-12-02T04:30:05.123Z","service":"pglease","err":{"type":"Error","message":"lease store unreachable: socket hang up","stack":"Error: lease store unreachable\\n    at connect (pg/client.js:1:1)\\ncaused by: Error: socket hang up\\n    at connect (pg/client.js:1:1)"},"msg":"renewal failed"}\n',
    '{"level":"error","time":"2026-12-02T04:30:05.123Z","service":"pglease","err":{"type":"Error","message":"bad pod","stack":"Error: bad pod\\n    at connect (pg/client.js:1:1)","cause":"a string cause"},"msg":"bad pod"}\n',
    '{"level":"error","time":"2026-12-02T04:30:05.123Z","service":"pglease","err":{"type":"PodApiError","message":"pod is invalid","stack":"PodApiError: pod is invalid\\n    at patch (kube/api.js:2:2)","status":422},"details":{"field":"metadata.labels","causes":[{"reason":"FieldValueInvalid"}]},"msg":"pod is invalid"}\n',
    '{"level":"debug","time":"2026-12-02T04:30:05.123Z","service":"pglease","pod":{"name":"orders-0","labels":{"role":"leader","pglease.io/fence":"3"}},"list":[1,"two",null,{}],"msg":"nested"}\n',
    '{"level":"info","time":"2026-12-02T04:30:05.123Z","service":"pglease","quote":"say \\"hi\\"","path":"C:\\\\tmp","line":"a\\nb\\tc","bell":"\\u0007","wide":"é ✓ 🚀 \u2028"}\n',
    `{"level":"info","time":"2026-12-02T04:30:05.123Z","service":"pglease","msg":"${"x".repeat(100)} \\"quoted\\" and \\\\ long"}\n`,
    '{"level":"info","time":"2026-12-02T04:30:05.123Z","service":"pglease","msg":"message with \\"quotes\\", a \\\\ and a\\nnewline"}\n',
    '{"level":"info","time":"2026-12-02T04:30:05.123Z","service":"pglease","nan":null,"inf":null,"none":null,"msg":"dropped"}\n',
    '{"level":"info","time":"2026-12-02T04:30:05.123Z","service":"pglease","at":"1970-01-01T00:00:00.000Z","msg":"a field named msg","msg":"and a message"}\n',
    '{"level":"info","time":"2026-12-02T04:30:05.123Z","service":"pglease","only":"fields"}\n',
    '{"level":"fatal","time":"2026-12-02T04:30:05.123Z","service":"pglease","msg":"fatal"}\n',
    '{"level":"error","time":"2026-12-02T04:30:05.123Z","service":"pglease","msg":"error"}\n',
    '{"level":"warn","time":"2026-12-02T04:30:05.123Z","service":"pglease","msg":"warn"}\n',
    '{"level":"debug","time":"2026-12-02T04:30:05.123Z","service":"pglease","msg":"debug"}\n',
    '{"level":"trace","time":"2026-12-02T04:30:05.123Z","service":"pglease","msg":"trace"}\n',
  ]);
});

it("writes the levels at and above the configured one, and nothing when silent", () => {
  const written = (level: LogLevel) => {
    const { logger, lines } = collect(level);
    const child = logger.child({ holder: "h" });
    for (const log of [logger, child]) {
      log.trace("trace");
      log.debug("debug");
      log.info("info");
      log.warn("warn");
      log.error("error");
      log.fatal("fatal");
    }
    return lines.map((line) => JSON.parse(line).msg);
  };
  const both = (...levels: string[]) => [...levels, ...levels];
  expect(written("trace")).toEqual(both("trace", "debug", "info", "warn", "error", "fatal"));
  expect(written("debug")).toEqual(both("debug", "info", "warn", "error", "fatal"));
  expect(written("info")).toEqual(both("info", "warn", "error", "fatal"));
  expect(written("warn")).toEqual(both("warn", "error", "fatal"));
  expect(written("error")).toEqual(both("error", "fatal"));
  expect(written("fatal")).toEqual(both("fatal"));
  expect(written("silent")).toEqual([]);
});

it("writes a circular or BigInt field as pino did, and never throws", () => {
  const { logger, lines } = collect("info");
  const pod: Record<string, unknown> = { name: "orders-0" };
  pod.self = pod;
  const failing = {
    toJSON() {
      throw new Error("cannot serialize");
    },
  };
  logger.info({ a: 1, pod, big: 12345678901234567890n, failing, z: "last" }, "odd fields");
  const looped = error("loop");
  Object.assign(looped, { again: looped });
  logger.error({ err: looped }, "an error that holds itself");
  expect(lines).toEqual([
    '{"level":"info","time":"2026-12-02T04:30:05.123Z","service":"pglease","a":1,"pod":{"name":"orders-0","self":"[Circular]"},"big":12345678901234567890,"failing":"[unable to serialize, circular reference is too complex to analyze]","z":"last","msg":"odd fields"}\n',
    '{"level":"error","time":"2026-12-02T04:30:05.123Z","service":"pglease","err":{"type":"Error","message":"loop","stack":"Error: loop\\n    at connect (pg/client.js:1:1)"},"msg":"an error that holds itself"}\n',
  ]);
});

it("scrubs the secrets from the whole line, in plain and JSON-escaped form", () => {
  const { logger, lines } = collect("info", ['pa"ss\\word']);
  logger
    .child({ url: 'postgres://u:pa"ss\\word@db' })
    .error({ err: error('auth failed for pa"ss\\word') }, "failed");
  expect(lines.join("")).not.toContain("word");
  expect(lines.join("")).toContain('"url":"postgres://u:***@db"');
  expect(JSON.parse(lines[0] as string).err.message).toBe("auth failed for ***");
});

it("writes an error passed in place of the fields as its err, as pino did", () => {
  // pino 10.4 wrote these lines; LogFn takes any object first, an Error among them.
  const { logger, lines } = collect("info");
  logger.error(error("connect ECONNREFUSED 10.0.0.1:5432", { code: "ECONNREFUSED" }), "could not connect");
  logger.error(error("socket hang up"));
  expect(lines).toEqual([
    '{"level":"error","time":"2026-12-02T04:30:05.123Z","service":"pglease","err":{"type":"Error","message":"connect ECONNREFUSED 10.0.0.1:5432","stack":"Error: connect ECONNREFUSED 10.0.0.1:5432\\n    at connect (pg/client.js:1:1)","code":"ECONNREFUSED"},"msg":"could not connect"}\n',
    '{"level":"error","time":"2026-12-02T04:30:05.123Z","service":"pglease","err":{"type":"Error","message":"socket hang up","stack":"Error: socket hang up\\n    at connect (pg/client.js:1:1)"},"msg":"socket hang up"}\n',
  ]);
});

it("writes the line when a field cannot even be read (a getter or a Proxy that throws)", () => {
  // pino threw out of the log call here; a log line must not stop the sidecar.
  const { logger, lines } = collect("info", ["s3cret"]);
  const getter = {
    a: 1,
    get pod(): unknown {
      throw new Error("not readable: s3cret");
    },
    z: "last",
  };
  const refusing = new Proxy(
    {},
    {
      ownKeys() {
        throw new Error("no keys");
      },
    },
  );
  const lendsNoMessage = {
    get err(): unknown {
      throw new Error("no err");
    },
  };
  expect(() => logger.info(getter, "odd getter")).not.toThrow();
  expect(() => logger.info(refusing, "odd proxy")).not.toThrow();
  expect(() => logger.error(lendsNoMessage)).not.toThrow();
  expect(() => logger.child(getter).warn("bound")).not.toThrow();
  const unreadable = '"[unable to serialize, circular reference is too complex to analyze]"';
  expect(lines).toEqual([
    `{"level":"info","time":"2026-12-02T04:30:05.123Z","service":"pglease","a":1,"pod":${unreadable},"z":"last","msg":"odd getter"}\n`,
    '{"level":"info","time":"2026-12-02T04:30:05.123Z","service":"pglease","msg":"odd proxy"}\n',
    `{"level":"error","time":"2026-12-02T04:30:05.123Z","service":"pglease","err":${unreadable}}\n`,
    `{"level":"warn","time":"2026-12-02T04:30:05.123Z","service":"pglease","a":1,"pod":${unreadable},"z":"last","msg":"bound"}\n`,
  ]);
});

it("keeps an object's key order where pino's fallback sorted it (a circular or BigInt value inside)", () => {
  // pino 10.4 wrote these fields with their keys sorted (safe-stable-stringify's fallback):
  // "err":{"message":"o","response":{"a":1,"self":"[Circular]","z":2},"stack":"…","type":"Error"},"big":{"a":2,"z":1}
  // Ours keeps the order every other line has (err's type first); the CHANGELOG says so.
  const { logger, lines } = collect("info");
  const response: Record<string, unknown> = { z: 2, a: 1 };
  response.self = response;
  logger.error({ err: error("o", { response }), big: { z: 1n, a: 2 } });
  expect(lines).toEqual([
    '{"level":"error","time":"2026-12-02T04:30:05.123Z","service":"pglease","err":{"type":"Error","message":"o","stack":"Error: o\\n    at connect (pg/client.js:1:1)","response":{"z":2,"a":1,"self":"[Circular]"}},"big":{"z":1,"a":2},"msg":"o"}\n',
  ]);
});
