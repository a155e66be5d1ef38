// The offset between the database server's clock and the local one, from answers alone: no
// database, plain numbers. Each answer bounds the offset by its send and receive times.
import { describe, expect, it } from "vitest";
import { clockStep, offsetRange, ServerClockWatch, serverNow } from "../../src/election/server-clock.ts";

const T0 = 1_800_000_000_000;

describe("server clock steps", () => {
  it("reads the server's time from an answer: expiry minus the ttl of the same statement", () => {
    expect(serverNow({ expiresAt: new Date(T0 + 15_000), ttlMs: 14_999.5 })).toBe(T0 + 0.5);
    expect(serverNow({ expiresAt: null, ttlMs: null })).toBeNull();
  });

  it("explains differences within the round trips, and reports what they cannot explain", () => {
    // Sent at 1000, answered at 1400: the server read T0 somewhere in between.
    const first = offsetRange(T0, 1_000, 1_400);
    expect(first).toEqual({ low: T0 - 1_400, high: T0 - 1_000 });
    // Five seconds later with a quick answer: anywhere in the first range is consistent.
    expect(clockStep(first, offsetRange(T0 + 5_300, 6_000, 6_010), 1_000)).toBeNull();
    // The server moved 8.4 s while the local clock moved at most 6010 − 1000 ms: at least 3.39 s unexplained.
    expect(clockStep(first, offsetRange(T0 + 8_400, 6_000, 6_010), 1_000)).toEqual({
      direction: "forward",
      sizeMs: 8_400 - (6_010 - 1_000),
    });
    // The server moved 2 s while the local clock moved at least 6000 − 1400 ms.
    expect(clockStep(first, offsetRange(T0 + 2_000, 6_000, 6_010), 1_000)).toEqual({
      direction: "backward",
      sizeMs: 6_000 - 1_400 - 2_000,
    });
    // Exactly at the margin is not beyond it.
    expect(clockStep({ low: 0, high: 0 }, { low: 1_000, high: 1_000 }, 1_000)).toBeNull();
  });

  it("compares each answer with the one before, so one step is reported once", () => {
    const watch = new ServerClockWatch("jobs", 1_000);
    const answer = (serverMs: number) => ({ expiresAt: new Date(serverMs + 15_000), ttlMs: 15_000 });
    expect(watch.observe(answer(T0), 0, 0)).toBeNull();
    const step = watch.observe(answer(T0 + 5_000 + 7_000), 5_000, 5_000);
    expect(step).toEqual({
      key: "jobs",
      direction: "forward",
      sizeMs: 7_000,
      sentence:
        "the database server's clock jumped forward by at least 7.0s against this process's clock (lease jobs): leases ran out sooner than computed",
    });
    expect(watch.observe(answer(T0 + 10_000 + 7_000), 10_000, 10_000)).toBeNull();
    expect(watch.observe(answer(T0 + 15_000), 15_000, 15_000)?.direction).toBe("backward");
  });
});
