// The claim statement's restart clause on a real PostgreSQL: a live lease changes hands before its
// expiry only to a holder carrying the same restart proof (the same lock, which only the
// predecessor's death frees), always as a new term with a higher fence.
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { ClaimAnswer } from "../../src/election/ports.ts";
import { migrate } from "../../src/postgres/migrate.ts";
import { PgLeaseStore } from "../../src/postgres/store.ts";
import { createTestDatabase, type TestDatabase } from "../support/postgres/database.ts";

let db: TestDatabase;
let pool: pg.Pool;
let store: PgLeaseStore;

const LOCK = "0123456789abcdef0123456789abcdef";
const OTHER_LOCK = "fedcba9876543210fedcba9876543210";
const MINUTE = 60_000;

beforeAll(async () => {
  db = await createTestDatabase();
  pool = new pg.Pool({ connectionString: db.url, max: 4 });
  store = new PgLeaseStore({ pool, statementTimeoutMs: 5_000 });
  await migrate(pool, store.table);
});

afterAll(async () => {
  await pool.end();
  await db.drop();
});

function won(answer: ClaimAnswer): number {
  if (!answer.won) throw new Error(`expected to win, ${answer.holder} holds it`);
  return answer.fence;
}

describe("taking over a live lease from a proven-dead predecessor", () => {
  it("a holder with the same restart proof takes the live lease at once, as a new term", async () => {
    const dead = won(await store.claim("same-lock", `pod-a-11111111#r:${LOCK}.100`, MINUTE));
    const successor = await store.claim("same-lock", `pod-a-22222222#r:${LOCK}.200`, MINUTE);
    expect(won(successor)).toBeGreaterThan(dead);
    // The history names it, in the log line's words too.
    expect(successor).toMatchObject({
      change: { reason: "restart-takeover", previousHolder: expect.stringMatching(/^pod-a-11111111/) },
    });
    // The predecessor's term is over: it can neither renew nor release.
    expect(await store.renew("same-lock", `pod-a-11111111#r:${LOCK}.100`, dead, MINUTE)).toEqual({
      renewed: false,
    });
    expect(await store.release("same-lock", `pod-a-11111111#r:${LOCK}.100`, dead)).toBe(false);
    expect((await store.read("same-lock"))?.holder).toBe(`pod-a-22222222#r:${LOCK}.200`);
  });

  it("another lock, no proof, a proof on one side only, or an earlier bind leaves the live lease where it is", async () => {
    const cases: Array<[string, string]> = [
      [`pod-a-11111111#r:${LOCK}.100`, `pod-b-22222222#r:${OTHER_LOCK}.200`],
      ["pod-a-11111111", "pod-a-22222222"],
      ["pod-a-11111111", `pod-a-22222222#r:${LOCK}.200`],
      [`pod-a-11111111#r:${LOCK}.100`, "pod-a-22222222"],
      // Not a proof: the marker must end the holder, with 32 hex digits, a dot and the bind instant.
      [`pod-a-11111111#r:${LOCK}.100x`, `pod-a-22222222#r:${LOCK}.200x`],
      [`pod-a-11111111#r:${LOCK}`, `pod-a-22222222#r:${LOCK}`],
      // The same lock bound earlier than the live holder's: a dead process's claim delivered late.
      [`pod-a-22222222#r:${LOCK}.200`, `pod-a-11111111#r:${LOCK}.100`],
      // Compared as numbers, not as text.
      [`pod-a-22222222#r:${LOCK}.99`, `pod-a-11111111#r:${LOCK}.100`].reverse() as [string, string],
    ];
    for (const [index, [holder, claimer]] of cases.entries()) {
      const key = `no-takeover-${index}`;
      const fence = won(await store.claim(key, holder, MINUTE));
      const answer = await store.claim(key, claimer, MINUTE);
      expect(answer, `${claimer} against ${holder}`).toMatchObject({ won: false, holder, fence });
    }
  });
});
