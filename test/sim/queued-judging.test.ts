// The differential test's reading of statements queued on a locked row
// (model-vs-postgres.test.ts), held to answers PostgreSQL really gave: the checker must admit
// them exactly when some commit order of the model gives them, whatever the machine's timing.
import { expect, it } from "vitest";
import { admitsQueued, type QueuedCase } from "./differential.ts";
import { SHIPPED } from "./profile.ts";

const msDate = (us: number) => new Date(Math.floor(us / 1000));

/**
 * Recorded from a run that failed (issue 27 point 5): h1 holds fence 4 for 60 s from `t`; a
 * renew, h2's claim, a renew and h1's re-claim queue on the locked row and commit renew, h2's
 * claim (lost), renew, h1's claim (won, fence 5, the expiry kept by greatest()). h1's claim was
 * sent 1.4 ms before its clock: its answer's dates, to the millisecond, fit that start bound as
 * well as its true clock, and the final row's acquired_at fits only the true clock.
 */
function recorded(): QueuedCase {
  const t = 1_796_140_659_355_304;
  const key = "queued-1";
  const expires = t + 60_000_000;
  return {
    sem: SHIPPED.sem,
    start: { key, holder: "h1", fence: 4, acquiredAt: t, expiresAt: expires, tuple: 1 },
    statements: [
      {
        request: { kind: "renew", key, holder: "h1", fence: 4, durationMs: 30_000 },
        before: t + 9_895,
        answer: { renewed: true, expiresAt: msDate(expires), ttlMs: 59_987.935 },
      },
      {
        request: { kind: "claim", key, holder: "h2", durationMs: 30_000 },
        before: t + 10_878,
        answer: { won: false, holder: "h1", fence: 4, expiresAt: msDate(expires), ttlMs: 59_983.769 },
      },
      {
        request: { kind: "renew", key, holder: "h1", fence: 4, durationMs: 20_000 },
        before: t + 12_149,
        answer: { renewed: true, expiresAt: msDate(expires), ttlMs: 59_985.154 },
      },
      {
        request: { kind: "claim", key, holder: "h1", durationMs: 40_000 },
        before: t + 12_945,
        answer: {
          won: true,
          fence: 5,
          acquiredAt: msDate(t + 14_364),
          expiresAt: msDate(expires),
          ttlMs: 59_985.636,
          change: { reason: "new-term", previousHolder: "h1" },
        },
      },
    ],
    waiting: t + 27_462,
    freedAt: t + 82_875,
    nextFence: 5,
    final: { holder: "h1", fence: 5, acquiredAt: t + 14_364, expiresAt: expires },
  };
}

it("statements queued on a locked row: a clock the answers admit but the final row refutes does not hide the one it confirms", () => {
  expect(admitsQueued(recorded())).toBe(true);
});

it("statements queued on a locked row: a final row no order and no clock gives is still refused", () => {
  const q = recorded();
  // acquired_at 2 ms after the claim's clock, which its answer's ttl pins to the millisecond.
  expect(
    admitsQueued({ ...q, final: q.final && { ...q.final, acquiredAt: q.final.acquiredAt + 2_000 } }),
  ).toBe(false);
  // The renew's answer says it committed before h1's new term; no order gives h2 the lease.
  expect(admitsQueued({ ...q, final: q.final && { ...q.final, holder: "h2" } })).toBe(false);
});
