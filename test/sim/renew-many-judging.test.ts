// The differential test's judging of a renewMany whose second term ends while the statement runs
// (model-vs-postgres.test.ts, seed 2 step 73 under load): each row's liveness is judged by the
// clock_timestamp() when the statement reaches it, not by its one now.t.
import { expect, it } from "vitest";
import { HOLDERS, judge, type MirrorCase } from "./differential.ts";
import type { LeaseRow } from "./lease-statements.ts";
import { SHIPPED } from "./profile.ts";

const msDate = (us: number) => new Date(Math.floor(us / 1000));

/**
 * The failure's figures: clock bounds 2,911 µs apart, PostgreSQL's now.t 729 µs after the start
 * bound (k1's written expiry − d), k1 renewed from it, k2 (fence 92) refused. The rows themselves
 * were not logged: k2's term here ends 1,500 µs after the start bound, k1's well after.
 */
function recorded(k2EndsAfterStart: number, answerKeys: string[]): MirrorCase {
  const before = 1_796_252_520_000_000;
  const after = before + 2_911;
  const clock = before + 729;
  const holder = HOLDERS[3] ?? "";
  const durationMs = 50;
  const k1: LeaseRow = {
    key: "k1",
    holder,
    fence: 83,
    acquiredAt: before - 40_000,
    expiresAt: before + 30_000,
    tuple: 1,
  };
  const k2: LeaseRow = {
    key: "k2",
    holder,
    fence: 92,
    acquiredAt: before - 20_000,
    expiresAt: before + k2EndsAfterStart,
    tuple: 2,
  };
  const expiresAt = clock + durationMs * 1000;
  const renewed = (row: LeaseRow) => ({ ...row, expiresAt });
  const answer = new Map(
    answerKeys.map((key) => [
      key,
      { fence: key === "k1" ? 83 : 92, expiresAt: msDate(expiresAt), ttlMs: (expiresAt - clock) / 1000 },
    ]),
  );
  const real = (row: LeaseRow) => {
    const { key: _key, tuple: _tuple, ...rest } = answerKeys.includes(row.key) ? renewed(row) : row;
    return rest;
  };
  return {
    sem: SHIPPED.sem,
    request: {
      kind: "renewMany",
      holder,
      terms: [
        { key: "k1", fence: 83 },
        { key: "k2", fence: 92 },
      ],
      durationMs,
    },
    rows: new Map([
      ["k1", k1],
      ["k2", k2],
    ]),
    before,
    after,
    realAnswer: answer,
    realRows: new Map([
      ["k1", real(k1)],
      ["k2", real(k2)],
    ]),
    fences: { next: 100, exact: true },
  };
}

it("renewMany: a term ending inside the clock bounds may be refused while the row before it renews from the earlier now.t", () => {
  const verdict = judge(recorded(1_500, ["k1"]));
  expect(verdict.ok, verdict.detail).toBe(true);
});

it("renewMany: both renewed is admitted too while k2's term was live at the start bound", () => {
  const verdict = judge(recorded(1_500, ["k1", "k2"]));
  expect(verdict.ok, verdict.detail).toBe(true);
});

it("renewMany: a term that ended before the start bound is never admitted as renewed", () => {
  const verdict = judge(recorded(-1, ["k1", "k2"]));
  expect(verdict.ok).toBe(false);
});
