import type pg from "pg";
import { afterAll, beforeAll, expect, it } from "vitest";
import { BatchedRenewals } from "../../src/lease/batched-renewals.ts";
import { migrate } from "../../src/lease/migrate.ts";
import { createLeasePool } from "../../src/lease/pool.ts";
import { PgLeaseStore } from "../../src/lease/store.ts";
import { createTestDatabase, type TestDatabase } from "../support/database.ts";

/** The real store, counting the statements the batcher sends through it. */
class CountingStore extends PgLeaseStore {
  renewCalls = 0;
  renewManyCalls: number[] = [];
  override renew(key: string, holder: string, fence: number, durationMs: number) {
    this.renewCalls++;
    return super.renew(key, holder, fence, durationMs);
  }
  override renewMany(
    holder: string,
    terms: ReadonlyArray<{ key: string; fence: number }>,
    durationMs: number,
  ) {
    this.renewManyCalls.push(terms.length);
    return super.renewMany(holder, terms, durationMs);
  }
}

let db: TestDatabase;
let pool: pg.Pool;
let store: CountingStore;

beforeAll(async () => {
  db = await createTestDatabase();
  pool = createLeasePool({ connectionString: db.url, max: 1 });
  store = new CountingStore({ pool, statementTimeoutMs: 5_000 });
  await migrate(pool, store.table);
});

afterAll(async () => {
  await pool.end();
  await db.drop();
});

it("renewals asked for in one tick go out as one statement, each with its own answer", async () => {
  const fences = new Map<string, number>();
  for (let i = 0; i < 300; i++) {
    const claim = await store.claim(`batch-${i}`, "p", 10_000);
    if (!claim.won) throw new Error("claim failed");
    fences.set(`batch-${i}`, claim.fence);
  }
  await pool.query(
    "UPDATE pglease_leases SET acquired_at = acquired_at - interval '1 minute', expires_at = clock_timestamp() - interval '1 second' WHERE key = 'batch-7'",
  );
  const batched = new BatchedRenewals(store, { maxBatch: 200 });
  const answers = await Promise.all(
    [...fences].map(([key, fence]) => batched.renew(key, "p", key === "batch-9" ? fence + 1 : fence, 20_000)),
  );
  expect(store.renewManyCalls).toEqual([200, 100]);
  expect(store.renewCalls).toBe(0);
  expect(answers.filter((a) => !a.renewed)).toHaveLength(2);
  expect(answers[7]).toEqual({ renewed: false });
  expect(answers[9]).toEqual({ renewed: false });
  expect(answers[0]).toMatchObject({ renewed: true });
  if (answers[0]?.renewed) expect(answers[0].ttlMs).toBeGreaterThan(19_000);
});

it("a lone renewal takes the single-row statement; another holder's terms go in their own statement", async () => {
  store.renewCalls = 0;
  store.renewManyCalls = [];
  const a = await store.claim("lone", "p", 10_000);
  const b1 = await store.claim("other-1", "q", 10_000);
  const b2 = await store.claim("other-2", "q", 10_000);
  if (!a.won || !b1.won || !b2.won) throw new Error("claim failed");
  const batched = new BatchedRenewals(store);
  const answers = await Promise.all([
    batched.renew("lone", "p", a.fence, 10_000),
    batched.renew("other-1", "q", b1.fence, 10_000),
    batched.renew("other-2", "q", b2.fence, 10_000),
  ]);
  expect(answers.every((x) => x.renewed)).toBe(true);
  expect(store.renewCalls).toBe(1);
  expect(store.renewManyCalls).toEqual([2]);
});

it("electors that acquired at different moments renew together: a statement per tick, not per lease", async () => {
  const { Elector } = await import("../../src/election/elector.ts");
  store.renewCalls = 0;
  store.renewManyCalls = [];
  const batched = new BatchedRenewals(store);
  const electors: InstanceType<typeof Elector>[] = [];
  try {
    for (let i = 0; i < 50; i++) {
      const e = new Elector({ key: `grid-${i}`, holder: "grid", store: batched, leaseDurationMs: 3_000 });
      e.start();
      electors.push(e);
      await new Promise((resolve) => setTimeout(resolve, 20)); // acquisitions spread over a second
    }
    await expect.poll(() => electors.every((e) => e.isLeader()), { timeout: 10_000 }).toBe(true);
    store.renewCalls = 0;
    store.renewManyCalls = [];
    await new Promise((resolve) => setTimeout(resolve, 2_100)); // two renew intervals of 1 s
    const statements = store.renewCalls + store.renewManyCalls.length;
    const renewed = store.renewCalls + store.renewManyCalls.reduce((a, b) => a + b, 0);
    expect(renewed).toBeGreaterThanOrEqual(100);
    expect(statements).toBeLessThanOrEqual(4);
  } finally {
    await Promise.all(electors.map((e) => e.stop()));
  }
});
