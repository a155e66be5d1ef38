// The store against a server clock the test sets (test/support/postgres/server-clock.ts): the exact expiry boundary,
// decided without sleeping, and what a backward step of the server's clock does to a live term.
import pg from "pg";
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import type { ClaimAnswer } from "../../src/election/ports.ts";
import { migrate } from "../../src/postgres/migrate.ts";
import { PgLeaseStore } from "../../src/postgres/store.ts";
import { createTestDatabase, type TestDatabase } from "../support/postgres/database.ts";
import { installServerClock, type ServerClock } from "../support/postgres/server-clock.ts";

let db: TestDatabase;
let admin: pg.Pool;
let clock: ServerClock;
let store: PgLeaseStore;

beforeAll(async () => {
  db = await createTestDatabase();
  admin = new pg.Pool({ connectionString: db.url, max: 1 });
  clock = await installServerClock(db.url);
  store = new PgLeaseStore({ pool: clock.pool, statementTimeoutMs: 5_000 });
  await migrate(admin, store.table);
});

beforeEach(async () => {
  await clock.set(new Date("2030-01-01T00:00:00Z"));
});

afterAll(async () => {
  await clock.end();
  await admin.end();
  await db.drop();
});

function won(answer: ClaimAnswer): number {
  if (!answer.won) throw new Error(`expected to win, ${answer.holder} holds it`);
  return answer.fence;
}

/** Puts the row's expiry `offsetUs` microseconds after the server clock (its start one second before). */
async function expireAt(key: string, offsetUs: number): Promise<void> {
  const { rowCount } = await admin.query(
    `UPDATE pglease_leases SET acquired_at = pglease_test_clock.clock_timestamp() - interval '1 second',
            expires_at = pglease_test_clock.clock_timestamp() + $2 * interval '1 microsecond' WHERE key = $1`,
    [key, offsetUs],
  );
  expect(rowCount).toBe(1);
}

describe("the expiry boundary", () => {
  it("at expires_at = now the term is over: renew and release refused, another holder's claim wins", async () => {
    const fence = won(await store.claim("edge", "a", 10_000));
    await expireAt("edge", 0);
    expect(await store.renew("edge", "a", fence, 10_000)).toEqual({ renewed: false });
    expect(await store.renewMany("a", [{ key: "edge", fence }], 10_000)).toEqual(new Map());
    expect(await store.release("edge", "a", fence)).toBe(false);
    expect(won(await store.claim("edge", "b", 10_000))).toBeGreaterThan(fence);
  });

  it("one microsecond before it the term is live: renewed and released by its holder, refused to another", async () => {
    const fence = won(await store.claim("edge-live", "a", 10_000));
    await expireAt("edge-live", 1);
    expect(await store.claim("edge-live", "b", 10_000)).toMatchObject({ won: false, holder: "a", fence });
    expect(await store.renew("edge-live", "a", fence, 10_000)).toMatchObject({
      renewed: true,
      ttlMs: 10_000,
    });
    await expireAt("edge-live", 1);
    expect(
      (await store.renewMany("a", [{ key: "edge-live", fence }], 10_000)).get("edge-live"),
    ).toMatchObject({
      fence,
      ttlMs: 10_000,
    });
    await expireAt("edge-live", 1);
    expect(await store.release("edge-live", "a", fence)).toBe(true);
  });

  it("a term that already expired cannot be released, and its row is left as it was", async () => {
    const fence = won(await store.claim("gone", "a", 10_000));
    await clock.step(10_001);
    const before = await store.read("gone");
    expect(await store.release("gone", "a", fence)).toBe(false);
    expect(await store.read("gone")).toEqual(before);
  });
});

describe("a backward step of the server clock", () => {
  it("never blocks the live holder's renew, and the expiry does not shrink", async () => {
    const claim = await store.claim("stepped", "a", 10_000);
    const fence = won(claim);
    if (!claim.won) return;
    const now = await clock.step(-60_000);
    const renew = await store.renew("stepped", "a", fence, 10_000);
    expect(renew).toMatchObject({ renewed: true, expiresAt: claim.expiresAt });
    if (renew.renewed) expect(renew.ttlMs).toBe(claim.expiresAt.getTime() - now.getTime());
    expect((await store.renewMany("a", [{ key: "stepped", fence }], 10_000)).get("stepped")).toMatchObject({
      expiresAt: claim.expiresAt,
    });
  });

  it("never blocks the live holder's claim of a new term", async () => {
    const fence = won(await store.claim("stepped-claim", "a", 10_000));
    await clock.step(-60_000);
    expect(won(await store.claim("stepped-claim", "a", 10_000))).toBeGreaterThan(fence);
  });

  it("a release after it frees the lease at once", async () => {
    const fence = won(await store.claim("stepped-release", "a", 10_000));
    await clock.step(-60_000);
    expect(await store.release("stepped-release", "a", fence)).toBe(true);
    expect(won(await store.claim("stepped-release", "b", 10_000))).toBeGreaterThan(fence);
    const next = won(await store.claim("stepped-forced", "a", 10_000));
    await clock.step(-60_000);
    expect(await store.forceRelease("stepped-forced")).toEqual({ holder: "a", fence: next });
    expect(won(await store.claim("stepped-forced", "b", 10_000))).toBeGreaterThan(next);
  });
});
