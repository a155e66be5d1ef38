// The history on tables made before it, and its retention, on a real PostgreSQL: re-migrating
// gives an existing lease table its history without locking it when complete; pruning is bounded
// and never holds up a claim.
import pg from "pg";
import { afterAll, beforeAll, expect, it } from "vitest";
import { readHistory } from "../../src/postgres/history-store.ts";
import { assertTablePresent, HistoryMissingError, migrate } from "../../src/postgres/migrate.ts";
import { createLeasePool } from "../../src/postgres/pool.ts";
import { PgLeaseStore } from "../../src/postgres/store.ts";
import { leaseTable } from "../../src/postgres/table.ts";
import { createTestDatabase, type TestDatabase } from "../support/postgres/database.ts";
import { pruneAll } from "./prune-all.ts";

let db: TestDatabase;
let pool: pg.Pool;

beforeAll(async () => {
  db = await createTestDatabase();
  pool = createLeasePool({ connectionString: db.url, max: 4, onIdleError: () => {} });
});
afterAll(async () => {
  await pool.end();
  await db.drop();
});

// What the migration made before the history existed, verbatim.
const PRE_HISTORY = (schema: string) => `
  CREATE SCHEMA ${schema};
  CREATE SEQUENCE ${schema}.pglease_leases_fence AS bigint MINVALUE 1;
  CREATE TABLE ${schema}.pglease_leases (
    key TEXT PRIMARY KEY, holder TEXT NOT NULL, fence BIGINT NOT NULL,
    acquired_at TIMESTAMPTZ NOT NULL, expires_at TIMESTAMPTZ NOT NULL,
    CONSTRAINT "pglease_leases_expires_after_acquired" CHECK (expires_at > acquired_at)
  ) WITH (fillfactor = 90);
  INSERT INTO ${schema}.pglease_leases VALUES ('old', 'a', 7, clock_timestamp(), clock_timestamp() + interval '1 hour');
  SELECT setval('${schema}.pglease_leases_fence', 7)`;

it("a table made by the migration before history gets it when migrated again; without migrations it is a clear error", async () => {
  await pool.query(PRE_HISTORY("upgraded"));
  const table = leaseTable("upgraded", "pglease_leases");
  const error = await assertTablePresent(pool, table).catch((e: unknown) => e);
  expect(error).toBeInstanceOf(HistoryMissingError);
  expect(String(error)).toMatch(
    /history of lease table upgraded\.pglease_leases is incomplete \(missing table upgraded\.pglease_leases_history.*run `pglease migrate`/,
  );

  await migrate(pool, table);
  await assertTablePresent(pool, table);
  const store = new PgLeaseStore({ pool, schema: "upgraded", statementTimeoutMs: 5_000 });
  expect(await store.release("old", "a", 7)).toBe(true);
  const claim = await store.claim("old", "b", 10_000);
  expect(claim).toMatchObject({ won: true, fence: 8, change: { reason: "claim", previousHolder: "a" } });
  const entries = await readHistory(pool, table, { limit: 10 });
  expect(entries.map((e) => [e.reason, e.fence, e.holder])).toEqual([
    ["release", 7, null],
    ["claim", 8, "b"],
  ]);
});

it("a migration that finds the history complete does not wait for the lease table's writers", async () => {
  const table = leaseTable("busy", "pglease_leases");
  await migrate(pool, table);
  const writer = new pg.Client({ connectionString: db.url });
  await writer.connect();
  try {
    // A claim or renew in flight holds ROW EXCLUSIVE; CREATE TRIGGER would queue behind it.
    await writer.query("BEGIN; LOCK TABLE busy.pglease_leases IN ROW EXCLUSIVE MODE");
    const other = new pg.Pool({ connectionString: db.url, max: 1 });
    try {
      await other.query("SET lock_timeout = '1s'");
      await migrate(other, table);
    } finally {
      await other.end();
    }
  } finally {
    await writer.query("ROLLBACK");
    await writer.end();
  }
});

it("pruning keeps at most the rows per key and drops entries past the age, always keeping each key's newest", async () => {
  const table = leaseTable("pruned", "pglease_leases");
  await migrate(pool, table);
  const store = new PgLeaseStore({ pool, schema: "pruned", statementTimeoutMs: 5_000 });
  for (let i = 0; i < 6; i++) {
    const won = await store.claim("many", "a", 10_000);
    if (!won.won) throw new Error("expected to win");
    await store.release("many", "a", won.fence);
  }
  await store.claim("once", "a", 10_000);
  await pool.query("UPDATE pruned.pglease_leases_history SET changed_at = changed_at - interval '2 days'");
  expect(await pruneAll(pool, table, { maxAgeMs: 30 * 86_400_000, maxRowsPerKey: 5 })).toBe(7);
  const kept = await readHistory(pool, table, { key: "many", limit: 100 });
  expect(kept.map((e) => e.reason)).toEqual(["release", "claim", "release", "claim", "release"]);

  expect(await pruneAll(pool, table, { maxAgeMs: 86_400_000, maxRowsPerKey: 5 })).toBe(4);
  const newest = await readHistory(pool, table, { limit: 100 });
  expect(newest.map((e) => [e.key, e.reason])).toEqual([
    ["many", "release"],
    ["once", "claim"],
  ]);
});

it("a prune in progress holds up neither a claim, a release nor another prune", async () => {
  const table = leaseTable("locked", "pglease_leases");
  await migrate(pool, table);
  const store = new PgLeaseStore({ pool, schema: "locked", statementTimeoutMs: 5_000 });
  for (let i = 0; i < 3; i++) {
    const won = await store.claim("k", "a", 10_000);
    if (won.won) await store.release("k", "a", won.fence);
  }
  const pruner = new pg.Client({ connectionString: db.url });
  await pruner.connect();
  try {
    await pruner.query("BEGIN");
    expect(await pruneAll(pruner, table, { maxAgeMs: 86_400_000, maxRowsPerKey: 1 })).toBe(5);
    // Uncommitted: the pruned entries stay locked. Everything below fails on its lock_timeout if it waits.
    const other = new pg.Pool({ connectionString: db.url, max: 1, options: "-c lock_timeout=500ms" });
    try {
      const otherStore = new PgLeaseStore({
        pool: other,
        schema: "locked",
        statementTimeoutMs: 5_000,
        preparedStatements: false,
      });
      const claim = await otherStore.claim("k", "b", 10_000);
      expect(claim).toMatchObject({ won: true, change: { reason: "claim", previousHolder: "a" } });
      if (claim.won) expect(await otherStore.release("k", "b", claim.fence)).toBe(true);
      // The entries the first prune holds are skipped: the old newest and b's claim go, b's release stays.
      expect(await pruneAll(other, table, { maxAgeMs: 86_400_000, maxRowsPerKey: 1 })).toBe(2);
    } finally {
      await other.end();
    }
  } finally {
    await pruner.query("COMMIT");
    await pruner.end();
  }
});

it("a lease role granted only the table and the sequence claims, releases and prunes; the history is recorded", async () => {
  const table = leaseTable("granted", "pglease_leases");
  await migrate(pool, table);
  await pool.query(
    "DO $$ BEGIN CREATE ROLE pglease_history_user LOGIN PASSWORD 'pw'; EXCEPTION WHEN duplicate_object THEN NULL; END $$",
  );
  await pool.query("GRANT USAGE ON SCHEMA granted TO pglease_history_user");
  await pool.query("GRANT SELECT, INSERT, UPDATE ON granted.pglease_leases TO pglease_history_user");
  await pool.query("GRANT USAGE ON SEQUENCE granted.pglease_leases_fence TO pglease_history_user");
  const url = new URL(db.url);
  url.username = "pglease_history_user";
  url.password = "pw";
  const restricted = new pg.Pool({ connectionString: url.toString(), max: 1 });
  try {
    await assertTablePresent(restricted, table);
    const store = new PgLeaseStore({ pool: restricted, schema: "granted", statementTimeoutMs: 5_000 });
    const won = await store.claim("k", "a", 10_000);
    if (!won.won) throw new Error("expected to win");
    expect(await store.release("k", "a", won.fence)).toBe(true);
    expect(await pruneAll(restricted, table, { maxAgeMs: 86_400_000, maxRowsPerKey: 1 })).toBe(1);
    // Reading it needs SELECT on the history, which this role was not given.
    await expect(readHistory(restricted, table, { limit: 10 })).rejects.toThrow(/permission denied/);
  } finally {
    await restricted.end();
  }
  expect((await readHistory(pool, table, { limit: 10 })).map((e) => e.reason)).toEqual(["release"]);
});
