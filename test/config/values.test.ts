// The value kinds the CLI accepts (src/config/values.ts): each parser answers the value, or a
// phrase saying what is allowed, which the caller prefixes with the flag or variable it came from.
import { describe, expect, it } from "vitest";
import {
  DURATION_PATTERN,
  LOG_LEVELS,
  parseAddress,
  parseBoolean,
  parseDuration,
  parseInteger,
  parseLeaseNames,
  parseLogLevel,
} from "../../src/config/values.ts";

describe("parseDuration", () => {
  it("takes Go's syntax, compound and decimal, plus d for days, in whole milliseconds", () => {
    expect(parseDuration("15s")).toEqual({ value: 15_000 });
    expect(parseDuration("500ms")).toEqual({ value: 500 });
    expect(parseDuration("2m")).toEqual({ value: 120_000 });
    expect(parseDuration("1h")).toEqual({ value: 3_600_000 });
    expect(parseDuration("1m30s")).toEqual({ value: 90_000 });
    expect(parseDuration("2h45m")).toEqual({ value: 9_900_000 });
    expect(parseDuration("1.5h")).toEqual({ value: 5_400_000 });
    expect(parseDuration(".5s")).toEqual({ value: 500 });
    expect(parseDuration(" 30d ")).toEqual({ value: 30 * 86_400_000 });
    expect(parseDuration("1h0m0.001s")).toEqual({ value: 3_600_001 });
  });

  it("counts exactly: 1.1s is 1100 ms, 0.29s is 290 ms", () => {
    expect(parseDuration("1.1s")).toEqual({ value: 1_100 });
    expect(parseDuration("0.29s")).toEqual({ value: 290 });
  });

  it("refuses what is not a duration, showing the forms it takes", () => {
    for (const nonsense of ["", "s", "15", "1x", "1s2", "1m 30s", "-1s", "1..5s", "1hh", "1.s.5", "1S"]) {
      expect(parseDuration(nonsense), nonsense).toEqual({
        problem: `${JSON.stringify(nonsense)} is not a duration; write a number and a unit, or several as Go does: 500ms, 15s, 1m30s, 1.5h, 30d`,
      });
    }
  });

  it("refuses a fraction of a millisecond, zero, and what a number cannot hold", () => {
    expect(parseDuration("1.5ms")).toEqual({
      problem: '"1.5ms" is not a whole number of milliseconds; pglease counts time in milliseconds',
    });
    expect(parseDuration("0.1ms")).toHaveProperty("problem");
    expect(parseDuration("0s")).toEqual({ problem: '"0s" must be longer than zero' });
    expect(parseDuration("0m0s")).toEqual({ problem: '"0m0s" must be longer than zero' });
    expect(parseDuration("99999999999999999d")).toEqual({ problem: '"99999999999999999d" is too long' });
  });

  it("its pattern (the chart's schema uses it) accepts exactly what the parser does", () => {
    const pattern = new RegExp(DURATION_PATTERN);
    for (const text of ["15s", "1m30s", ".5s", "30d", "1.5h"]) expect(pattern.test(text), text).toBe(true);
    for (const text of ["15", "-1s", "1m 30s", "1S"]) expect(pattern.test(text), text).toBe(false);
  });
});

describe("parseBoolean", () => {
  it("takes true/false, 1/0, yes/no and on/off in any case", () => {
    for (const yes of ["true", "TRUE", "1", "yes", "On", " true "])
      expect(parseBoolean(yes)).toEqual({ value: true });
    for (const no of ["false", "0", "no", "OFF"]) expect(parseBoolean(no)).toEqual({ value: false });
  });

  it("refuses anything else, saying what to use", () => {
    expect(parseBoolean("maybe")).toEqual({ problem: '"maybe" is not a boolean; use true or false' });
    expect(parseBoolean("")).toEqual({ problem: '"" is not a boolean; use true or false' });
  });
});

describe("parseInteger", () => {
  it("takes a whole number within its bounds, bounds included", () => {
    expect(parseInteger("1", 1, 100)).toEqual({ value: 1 });
    expect(parseInteger("100", 1, 100)).toEqual({ value: 100 });
    expect(parseInteger(" 42 ", 1, 100)).toEqual({ value: 42 });
  });

  it("refuses what is out of bounds, signed, fractional or not a number, naming the bounds", () => {
    for (const bad of ["0", "101", "-1", "+5", "1.5", "1e2", "ten", ""]) {
      expect(parseInteger(bad, 1, 100), bad).toEqual({
        problem: `${JSON.stringify(bad)} must be a whole number from 1 to 100`,
      });
    }
  });
});

describe("parseAddress", () => {
  it("takes host:port, [v6]:port and :port (every address, dual-stack)", () => {
    expect(parseAddress(":8484")).toEqual({ value: { host: "::", port: 8484 } });
    expect(parseAddress("127.0.0.1:0")).toEqual({ value: { host: "127.0.0.1", port: 0 } });
    expect(parseAddress("[::1]:9")).toEqual({ value: { host: "::1", port: 9 } });
    expect(parseAddress("0.0.0.0:65535")).toEqual({ value: { host: "0.0.0.0", port: 65_535 } });
  });

  it("refuses a missing or bad port, with examples of what works", () => {
    for (const bad of ["nowhere", "host:99999", "host:", "host:http", "8484"]) {
      expect(parseAddress(bad), bad).toEqual({
        problem: `${JSON.stringify(bad)} is not an address; use host:port or :port, e.g. :8484, [::]:8484, 0.0.0.0:8484 or 127.0.0.1:0`,
      });
    }
  });
});

describe("parseLogLevel", () => {
  it("takes the levels fatal to trace and silent, in any case", () => {
    for (const level of LOG_LEVELS) expect(parseLogLevel(level.toUpperCase())).toEqual({ value: level });
  });

  it("refuses another word, listing the levels", () => {
    expect(parseLogLevel("loud")).toEqual({
      problem: '"loud" is not a log level; use one of fatal, error, warn, info, debug, trace, silent',
    });
  });
});

describe("parseLeaseNames", () => {
  it("takes a comma-separated list, spaces and empty entries left out", () => {
    expect(parseLeaseNames("a, b,c")).toEqual({ value: ["a", "b", "c"] });
    expect(parseLeaseNames("orders-sync,,billing/eu:1")).toEqual({ value: ["orders-sync", "billing/eu:1"] });
    expect(parseLeaseNames("Zähler")).toEqual({ value: ["Zähler"] });
  });

  it("refuses an empty list, bad names (all of them at once) and a name given twice", () => {
    expect(parseLeaseNames(" , ")).toEqual({
      problem: "names no lease; give at least one, e.g. orders-sync",
    });
    const rule =
      "use letters, digits and . _ : / - (at most 200 characters, starting with a letter or digit)";
    expect(parseLeaseNames("ok,-x")).toEqual({ problem: `"-x" is not a lease name; ${rule}` });
    expect(parseLeaseNames("a b,c*")).toEqual({ problem: `"a b", "c*" are not lease names; ${rule}` });
    expect(parseLeaseNames(`a${"b".repeat(200)}`)).toHaveProperty("problem");
    expect(parseLeaseNames(`a${"b".repeat(199)}`)).toEqual({ value: [`a${"b".repeat(199)}`] });
    expect(parseLeaseNames("a,b,a")).toEqual({ problem: 'names lease "a" twice' });
  });
});
