// Within one term the expiry only grows. A lease statement reads the server clock before it waits
// for the row lock, and statements queued on one row commit in any order: one that carries an
// older clock and commits last must not shorten the lease below what a later answer promised.
// Reproduced deterministically: the statement under test waits behind a row lock; the locker
// itself then sets a later expiry (a newer statement that committed first) and commits.
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { migrate } from "../../src/postgres/migrate.ts";
import { createLeasePool } from "../../src/postgres/pool.ts";
import { PgLeaseStore } from "../../src/postgres/store.ts";
import { createTestDatabase, type TestDatabase } from "../support/postgres/database.ts";
import { lockRow, waitForLockWaiters } from "../support/postgres/row-lock.ts";

const APP = "pglease-expiry-order";
let db: TestDatabase;
let pool: pg.Pool;
let probe: pg.Pool;
let store: PgLeaseStore;

beforeAll(async () => {
  db = await createTestDatabase();
  pool = createLeasePool({ connectionString: db.url, max: 4, applicationName: APP });
  probe = new pg.Pool({ connectionString: db.url, max: 1 });
  store = new PgLeaseStore({ pool, statementTimeoutMs: 10_000 });
  await migrate(pool, store.table);
});

afterAll(async () => {
  await pool.end();
  await probe.end();
  await db.drop();
});

const LATER_EXPIRY = (qualified: string) => `
  UPDATE ${qualified} SET expires_at = clock_timestamp() + $2 * interval '1 millisecond'
   WHERE key = $1 RETURNING expires_at`;

async function expiresAt(key: string): Promise<Date> {
  const view = await store.read(key);
  if (!view) throw new Error(`no row for ${key}`);
  return view.expiresAt;
}

/**
 * Starts `statement` while `key` is locked, waits until it queues on the server, then lets the
 * locker commit a later expiry for each key first; answers that promised expiry and the statement's answer.
 */
async function queuedBehindNewerCommit<T>(
  keys: string[],
  durationMs: number,
  statement: () => Promise<T>,
): Promise<{ promised: Date[]; answer: T }> {
  const [first, ...rest] = keys;
  if (!first) throw new Error("no key");
  const locker = await lockRow(db.url, store.table.qualified, first);
  try {
    const pending = statement();
    await waitForLockWaiters(probe, APP);
    const promised: Date[] = [];
    for (const key of [first, ...rest]) {
      const { rows } = await locker.query<{ expires_at: Date }>(LATER_EXPIRY(store.table.qualified), [
        key,
        durationMs,
      ]);
      if (!rows[0]) throw new Error(`no row for ${key}`);
      promised.push(rows[0].expires_at);
    }
    await locker.commit();
    return { promised, answer: await pending };
  } catch (error) {
    await locker.rollback().catch(() => {});
    throw error;
  }
}

describe("a statement with an older clock that commits last", () => {
  it("renew never moves the expiry backwards", async () => {
    const claim = await store.claim("renew-late", "a", 10_000);
    if (!claim.won) throw new Error("claim failed");
    const { promised, answer } = await queuedBehindNewerCommit(["renew-late"], 10_000, () =>
      store.renew("renew-late", "a", claim.fence, 10_000),
    );
    expect(answer).toMatchObject({ renewed: true });
    if (!answer.renewed) return;
    expect(answer.expiresAt.getTime()).toBeGreaterThanOrEqual(promised[0]?.getTime() ?? Number.NaN);
    expect((await expiresAt("renew-late")).getTime()).toBe(answer.expiresAt.getTime());
  });

  it("a batched renew never moves any expiry backwards", async () => {
    const keys = ["many-late-0", "many-late-1"];
    const terms: Array<{ key: string; fence: number }> = [];
    for (const key of keys) {
      const claim = await store.claim(key, "m", 10_000);
      if (!claim.won) throw new Error("claim failed");
      terms.push({ key, fence: claim.fence });
    }
    const { promised, answer } = await queuedBehindNewerCommit(keys, 10_000, () =>
      store.renewMany("m", terms, 10_000),
    );
    expect(answer.size).toBe(2);
    for (const [i, key] of keys.entries()) {
      expect((await expiresAt(key)).getTime()).toBeGreaterThanOrEqual(promised[i]?.getTime() ?? Number.NaN);
      expect(answer.get(key)?.expiresAt.getTime()).toBe((await expiresAt(key)).getTime());
    }
  });

  it("a renew or release that waited past the expiry does not touch the ended term", async () => {
    const cases: Array<[string, (fence: number) => Promise<unknown>, unknown]> = [
      ["resurrect-renew", (fence) => store.renew("resurrect-renew", "a", fence, 10_000), { renewed: false }],
      [
        "resurrect-many",
        (fence) => store.renewMany("a", [{ key: "resurrect-many", fence }], 10_000),
        new Map(),
      ],
      ["resurrect-release", (fence) => store.release("resurrect-release", "a", fence), false],
    ];
    for (const [key, statement, refused] of cases) {
      const claim = await store.claim(key, "a", 10_000);
      if (!claim.won) throw new Error("claim failed");
      // The locker ends the term at its own (later) instant; the queued statement's clock is older.
      const { promised, answer } = await queuedBehindNewerCommit([key], 0, () => statement(claim.fence));
      expect(answer).toEqual(refused);
      expect((await expiresAt(key)).getTime()).toBe(promised[0]?.getTime());
    }
  });

  it("a claim by the holder of a live lease never moves the expiry backwards", async () => {
    await store.claim("claim-late", "a", 10_000);
    const { promised, answer } = await queuedBehindNewerCommit(["claim-late"], 10_000, () =>
      store.claim("claim-late", "a", 10_000),
    );
    expect(answer).toMatchObject({ won: true });
    if (!answer.won) return;
    expect(answer.expiresAt.getTime()).toBeGreaterThanOrEqual(promised[0]?.getTime() ?? Number.NaN);
    expect((await expiresAt("claim-late")).getTime()).toBe(answer.expiresAt.getTime());
  });
});
