// The history trigger on a real PostgreSQL: every change of hands is recorded in the statement
// that makes it, in the words the claim's answer also gives; renewals record nothing.
import type pg from "pg";
import { afterAll, beforeAll, expect, it } from "vitest";
import type { ClaimAnswer } from "../../src/election/ports.ts";
import { readHistory } from "../../src/postgres/history-store.ts";
import { migrate } from "../../src/postgres/migrate.ts";
import { createLeasePool } from "../../src/postgres/pool.ts";
import { PgLeaseStore } from "../../src/postgres/store.ts";
import { createTestDatabase, type TestDatabase } from "../support/postgres/database.ts";

let db: TestDatabase;
let pool: pg.Pool;
let store: PgLeaseStore;

beforeAll(async () => {
  db = await createTestDatabase();
  pool = createLeasePool({ connectionString: db.url, max: 4, onIdleError: () => {} });
  store = new PgLeaseStore({ pool, statementTimeoutMs: 5_000 });
  await migrate(pool, store.table);
});
afterAll(async () => {
  await pool.end();
  await db.drop();
});

const history = async (key: string) =>
  (await readHistory(pool, store.table, { key, limit: 100 })).map((e) => ({
    fence: e.fence,
    holder: e.holder,
    previous: e.previousHolder,
    reason: e.reason,
  }));

function won(answer: ClaimAnswer) {
  if (!answer.won) throw new Error(`expected to win, ${answer.holder} holds it`);
  return answer;
}

async function expire(key: string): Promise<void> {
  await pool.query(
    `UPDATE pglease_leases SET acquired_at = clock_timestamp() - interval '2 seconds',
                               expires_at = clock_timestamp() - interval '1 second' WHERE key = $1`,
    [key],
  );
}

it("records claims, releases, takeovers, new terms and forced releases, and the claim answers the same reason", async () => {
  const first = won(await store.claim("k", "a", 10_000));
  expect(first.change).toEqual({ reason: "claim", previousHolder: null });
  expect(await store.release("k", "a", first.fence)).toBe(true);
  const second = won(await store.claim("k", "b", 10_000));
  expect(second.change).toEqual({ reason: "claim", previousHolder: "a" });
  // The hand-made expiry shortens the lease: it is recorded like a release (holder unchanged, expiry cut).
  await expire("k");
  const third = won(await store.claim("k", "c", 10_000));
  const fourth = won(await store.claim("k", "c", 10_000));
  expect(await store.forceRelease("k")).toEqual({ holder: "c", fence: fourth.fence });
  await pool.query("DELETE FROM pglease_leases WHERE key = 'k'");
  expect(await history("k")).toEqual([
    { fence: first.fence, holder: "a", previous: null, reason: "claim" },
    { fence: first.fence, holder: null, previous: "a", reason: "release" },
    { fence: second.fence, holder: "b", previous: "a", reason: "claim" },
    { fence: second.fence, holder: null, previous: "b", reason: "release" },
    { fence: third.fence, holder: "c", previous: "b", reason: "claim" },
    { fence: fourth.fence, holder: "c", previous: "c", reason: "new-term" },
    { fence: fourth.fence, holder: null, previous: "c", reason: "forced-release" },
    { fence: fourth.fence, holder: null, previous: "c", reason: "deleted" },
  ]);
});

it("an expired term taken over by another holder is an expiry takeover", async () => {
  const first = won(await store.claim("t", "a", 10_000));
  // Expiry moved into the past without the trigger: the way a lease really runs out.
  await pool.query("ALTER TABLE pglease_leases DISABLE TRIGGER pglease_history_update");
  try {
    await expire("t");
  } finally {
    await pool.query("ALTER TABLE pglease_leases ENABLE TRIGGER pglease_history_update");
  }
  const taken = won(await store.claim("t", "b", 10_000));
  expect(taken.change).toEqual({ reason: "expiry-takeover", previousHolder: "a" });
  expect(await history("t")).toEqual([
    { fence: first.fence, holder: "a", previous: null, reason: "claim" },
    { fence: taken.fence, holder: "b", previous: "a", reason: "expiry-takeover" },
  ]);
});

it("renewals, single and batched, and lost claims write no history", async () => {
  const term = won(await store.claim("r", "a", 10_000));
  for (let i = 0; i < 5; i++) {
    expect((await store.renew("r", "a", term.fence, 10_000)).renewed).toBe(true);
    expect((await store.renewMany("a", [{ key: "r", fence: term.fence }], 10_000)).size).toBe(1);
    expect((await store.claim("r", "b", 10_000)).won).toBe(false);
  }
  expect(await history("r")).toHaveLength(1);
});
