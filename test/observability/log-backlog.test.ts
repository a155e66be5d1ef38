// A log reader that is behind: stdout's queue is bounded (lines past it dropped, then counted in a
// line of their own), and an exit can wait for what is queued, within a bound. The reader here is
// a Writable that holds each write until released, so its queue is Node's own (writableLength).
import { Writable } from "node:stream";
import { afterEach, expect, it, vi } from "vitest";
import { createLogger, flushed, MAX_QUEUED_BYTES } from "../../src/observability/logger.ts";

afterEach(() => vi.useRealTimers());

/** A stdout whose reader takes nothing until `resume()`, then everything as it comes. */
function stalledReader() {
  const taken: string[] = [];
  let held: (() => void) | null = null;
  let reading = false;
  const out = new Writable({
    write(chunk: Buffer, _encoding, done) {
      taken.push(chunk.toString());
      if (reading) done();
      else held = done;
    },
  });
  const resume = () => {
    reading = true;
    held?.();
  };
  return { out, taken, resume };
}

const parse = (line: string | undefined) => JSON.parse(line ?? "") as Record<string, unknown>;

it("drops lines past MAX_QUEUED_BYTES queued, and counts them in a line once the reader catches up", async () => {
  const { out, taken, resume } = stalledReader();
  const logger = createLogger("info", [], out).child({ holder: "pod-a" });
  let written = 0;
  while (out.writableLength < MAX_QUEUED_BYTES) logger.info({ n: ++written }, "x".repeat(1000));
  const queued = out.writableLength;
  for (let i = 0; i < 5; i++) logger.info({ n: written + 1 + i }, "dropped while the reader is behind");
  expect(out.writableLength).toBe(queued);

  resume();
  await new Promise((resolve) => setImmediate(resolve));
  expect(out.writableLength).toBe(0);
  logger.info("caught up");
  const lines = taken.filter((t) => t !== "");
  expect(lines).toHaveLength(written + 2);
  expect(parse(lines.at(-3))).toMatchObject({ n: written });
  expect(parse(lines.at(-2))).toMatchObject({
    level: "warn",
    dropped: 5,
    msg: `5 log lines dropped: stdout had ${MAX_QUEUED_BYTES} bytes queued for a reader that was behind`,
  });
  // Counted across every logger: not attributed to the child that wrote next.
  expect(parse(lines.at(-2))).not.toHaveProperty("holder");
  expect(parse(lines.at(-1))).toMatchObject({ level: "info", msg: "caught up" });
});

it("drops warnings and errors only past twice the bound", () => {
  const { out } = stalledReader();
  const logger = createLogger("info", [], out);
  while (out.writableLength < MAX_QUEUED_BYTES) logger.info("x".repeat(1000));
  const atBound = out.writableLength;
  logger.info("dropped");
  expect(out.writableLength).toBe(atBound);
  while (out.writableLength < 2 * MAX_QUEUED_BYTES) logger.error("y".repeat(1000));
  const atWarnBound = out.writableLength;
  logger.warn("dropped too");
  logger.error("and this");
  expect(out.writableLength).toBe(atWarnBound);
});

it("flushed: true once every line written before it has been taken", async () => {
  const { out, resume } = stalledReader();
  expect(await flushed(out, 1000)).toBe(true);
  const logger = createLogger("info", [], out);
  for (let i = 0; i < 100; i++) logger.info({ i }, "queued");
  let result: boolean | undefined;
  const done = flushed(out, 60_000).then((r) => {
    result = r;
  });
  await new Promise((resolve) => setImmediate(resolve));
  expect(result).toBeUndefined();
  resume();
  await done;
  expect(result).toBe(true);
  expect(out.writableLength).toBe(0);
});

it("flushed: false once the bound passes with the reader still stalled", async () => {
  vi.useFakeTimers({ toFake: ["setTimeout", "clearTimeout"] });
  const { out } = stalledReader();
  createLogger("info", [], out).info("never taken");
  let result: boolean | undefined;
  void flushed(out, 1000).then((r) => {
    result = r;
  });
  await vi.advanceTimersByTimeAsync(999);
  expect(result).toBeUndefined();
  await vi.advanceTimersByTimeAsync(1);
  expect(result).toBe(false);
});

// The lines an exit logs are the ones its flush is for ("second SIGTERM: exiting now…", "graceful
// stop did not finish…"): warn and error pass the bound that drops info, with the count before them.
it("an exit's last line, logged with the queue at the bound, reaches a reader that catches up during the exit flush", async () => {
  const { out, taken, resume } = stalledReader();
  const logger = createLogger("info", [], out).child({ holder: "pod-a" });
  while (out.writableLength < MAX_QUEUED_BYTES) logger.info("x".repeat(1000));
  logger.info("dropped: at the bound");
  logger.warn("second SIGTERM: exiting now without finishing the graceful stop");
  // run.ts's exitNow: flush (the reader is merely slow: it catches up), then process.exit.
  const done = flushed(out, 1000);
  resume();
  expect(await done).toBe(true);
  const last = taken.filter((t) => t !== "").map(parse);
  // The count of what was dropped goes out ahead of the exit's line, which is not dropped.
  expect(last.at(-2)).toMatchObject({ level: "warn", dropped: 1 });
  expect(last.at(-1)).toMatchObject({
    msg: "second SIGTERM: exiting now without finishing the graceful stop",
  });
});

// The count covers lines from every logger: it is not attributed to the child that logs next.
it("the dropped count is not attributed to the component whose line happens to come next", async () => {
  const { out, taken, resume } = stalledReader();
  const root = createLogger("info", [], out);
  const publisher = root.child({ component: "publisher" });
  const health = root.child({ component: "health" });
  while (out.writableLength < MAX_QUEUED_BYTES) root.info("x".repeat(1000));
  publisher.info("dropped: from the publisher");
  resume();
  await new Promise((resolve) => setImmediate(resolve));
  health.info("caught up");
  const count = taken
    .filter((t) => t !== "")
    .map(parse)
    .find((l) => typeof l.dropped === "number");
  expect(count).toMatchObject({ dropped: 1 });
  expect(count).not.toHaveProperty("component", "health");
});
