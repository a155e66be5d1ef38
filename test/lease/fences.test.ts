// Every claim that wins starts a new term with a fence above every fence handed out before for
// its key, whoever claims and whatever was done to the row or the table: fences come from a
// sequence the lease table does not own.
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { ClaimAnswer } from "../../src/election/ports.ts";
import { createFenceGuard, StaleFenceError } from "../../src/fence/index.ts";
import { assertTablePresent, migrate } from "../../src/postgres/migrate.ts";
import { PgLeaseStore } from "../../src/postgres/store.ts";
import { type LeaseTable, leaseTable } from "../../src/postgres/table.ts";
import { createTestDatabase, type TestDatabase } from "../support/postgres/database.ts";

let db: TestDatabase;
let pool: pg.Pool;

beforeAll(async () => {
  db = await createTestDatabase();
  pool = new pg.Pool({ connectionString: db.url, max: 4 });
});

afterAll(async () => {
  await pool.end();
  await db.drop();
});

function won(answer: ClaimAnswer): number {
  if (!answer.won) throw new Error(`expected to win, ${answer.holder} holds it`);
  return answer.fence;
}

async function storeIn(schema: string): Promise<PgLeaseStore> {
  await pool.query(`CREATE SCHEMA IF NOT EXISTS ${schema}`);
  const store = new PgLeaseStore({ pool, schema, statementTimeoutMs: 5_000 });
  await migrate(pool, store.table);
  return store;
}

// The table exactly as migrate created it before fences had their own counter.
const TABLE_BEFORE_SEQUENCE = (t: LeaseTable) => `
  CREATE TABLE ${t.qualified} (
    key TEXT PRIMARY KEY, holder TEXT NOT NULL, fence BIGINT NOT NULL,
    acquired_at TIMESTAMPTZ NOT NULL, expires_at TIMESTAMPTZ NOT NULL,
    CONSTRAINT "${t.table}_expires_after_acquired" CHECK (expires_at > acquired_at)
  ) WITH (fillfactor = 90)`;

describe("a new term on every claim that wins", () => {
  it("the holder of a live lease claiming again gets a higher fence and a new acquired_at", async () => {
    const store = await storeIn("reclaim");
    const first = await store.claim("job", "a", 10_000);
    const second = await store.claim("job", "a", 10_000);
    expect(won(second)).toBeGreaterThan(won(first));
    if (first.won && second.won)
      expect(second.acquiredAt.getTime()).toBeGreaterThan(first.acquiredAt.getTime());
    // The ended term can no longer renew or release; the new one can.
    expect(await store.renew("job", "a", won(first), 10_000)).toEqual({ renewed: false });
    expect(await store.release("job", "a", won(first))).toBe(false);
    expect(await store.renew("job", "a", won(second), 10_000)).toMatchObject({ renewed: true });
  });
});

describe("fences never restart, whatever is done to the rows", () => {
  it.each([
    ["a deleted row", (t: LeaseTable) => `DELETE FROM ${t.qualified}`],
    ["a truncated table", (t: LeaseTable) => `TRUNCATE ${t.qualified}`],
    ["a dropped table, migrated again", (t: LeaseTable) => `DROP TABLE ${t.qualified}`],
  ])("after %s the next claim gets a higher fence", async (_, wipe) => {
    const store = await storeIn(`wiped_${Math.random().toString(36).slice(2, 8)}`);
    let highest = 0;
    for (let i = 0; i < 3; i++) {
      highest = won(await store.claim("job", `pod-${i}`, 10_000));
      await store.release("job", `pod-${i}`, highest);
    }
    await pool.query(wipe(store.table));
    await migrate(pool, store.table);
    expect(won(await store.claim("job", "pod-new", 10_000))).toBeGreaterThan(highest);
    expect(won(await store.claim("other-key", "pod-new", 10_000))).toBeGreaterThan(highest);
  });
});

describe("through the fence guard", () => {
  it("after the lease table is recreated the new leader passes the guard and the old one is refused", async () => {
    const store = await storeIn("guarded");
    const guard = createFenceGuard({ pool, schema: "guarded" });
    await guard.migrate();
    const old = won(await store.claim("job", "old-leader", 10_000));
    await guard.run("orders", old, async () => {});
    await pool.query(`DROP TABLE ${store.table.qualified}`);
    await migrate(pool, store.table);
    const next = won(await store.claim("job", "new-leader", 10_000));
    await guard.run("orders", next, async () => {});
    await expect(guard.run("orders", old, async () => {})).rejects.toBeInstanceOf(StaleFenceError);
  });
});

describe("migration", () => {
  it("upgrades a table made before the sequence: fences continue above every row's", async () => {
    const t = leaseTable("upgraded", "pglease_leases");
    await pool.query("CREATE SCHEMA upgraded");
    await pool.query(TABLE_BEFORE_SEQUENCE(t));
    await pool.query(
      `INSERT INTO ${t.qualified} VALUES ('old', 'pod-1', 41, clock_timestamp() - interval '1 minute',
                                           clock_timestamp() - interval '1 second')`,
    );
    const pools = Array.from({ length: 5 }, () => new pg.Pool({ connectionString: db.url, max: 1 }));
    try {
      await Promise.all(pools.map((p) => migrate(p, t)));
    } finally {
      await Promise.all(pools.map((p) => p.end()));
    }
    const store = new PgLeaseStore({ pool, schema: "upgraded", statementTimeoutMs: 5_000 });
    await pool.query(`DELETE FROM ${t.qualified}`);
    expect(won(await store.claim("old", "pod-2", 10_000))).toBe(42);
    await migrate(pool, t);
    expect(won(await store.claim("new", "pod-2", 10_000))).toBe(43);
  });

  it("an existing table and sequence are used by a role that may not create anything", async () => {
    const store = await storeIn("restricted");
    await pool.query(
      "DO $$ BEGIN CREATE ROLE pglease_fences_user LOGIN PASSWORD 'pw'; EXCEPTION WHEN duplicate_object THEN NULL; END $$",
    );
    await pool.query(
      "GRANT USAGE ON SCHEMA restricted TO pglease_fences_user; " +
        "GRANT SELECT, INSERT, UPDATE ON restricted.pglease_leases TO pglease_fences_user; " +
        "GRANT USAGE ON SEQUENCE restricted.pglease_leases_fence TO pglease_fences_user",
    );
    const url = new URL(db.url);
    url.username = "pglease_fences_user";
    url.password = "pw";
    const restricted = new pg.Pool({ connectionString: url.toString(), max: 1 });
    try {
      await pool.query("REVOKE USAGE ON SEQUENCE restricted.pglease_leases_fence FROM pglease_fences_user");
      const missing =
        /role pglease_fences_user cannot claim leases in restricted\.pglease_leases: it lacks USAGE on its fence sequence; run as the table's owner: GRANT USAGE ON SEQUENCE "restricted"\."pglease_leases_fence" TO "pglease_fences_user"$/;
      await expect(migrate(restricted, store.table)).rejects.toThrow(missing);
      await expect(assertTablePresent(restricted, store.table)).rejects.toThrow(missing);
      await pool.query("GRANT USAGE ON SEQUENCE restricted.pglease_leases_fence TO pglease_fences_user");
      await migrate(restricted, store.table);
      await assertTablePresent(restricted, store.table);
      const limited = new PgLeaseStore({ pool: restricted, schema: "restricted", statementTimeoutMs: 5_000 });
      expect(won(await limited.claim("job", "a", 10_000))).toBeGreaterThan(0);
    } finally {
      await restricted.end();
    }
  });

  it("without migrations, a table whose sequence is missing is a clear error", async () => {
    const t = leaseTable("no_sequence", "pglease_leases");
    await pool.query("CREATE SCHEMA no_sequence");
    await pool.query(TABLE_BEFORE_SEQUENCE(t));
    await expect(assertTablePresent(pool, t)).rejects.toThrow(
      /sequence no_sequence\.pglease_leases_fence does not exist.*pglease migrate/,
    );
  });
});
