// A history made by the pglease before the walk over the keys (one ranking prune function, no
// indexes for pruning) upgrades on a real PostgreSQL: migrating again adds the indexes and the
// functions, and the old function, which replicas not yet upgraded still call, prunes by age alone.
import pg from "pg";
import { afterAll, beforeAll, expect, it } from "vitest";
import { readHistory } from "../../src/postgres/history-store.ts";
import { assertTablePresent, HistoryMissingError, migrate } from "../../src/postgres/migrate.ts";
import { PgLeaseStore } from "../../src/postgres/store.ts";
import { leaseTable } from "../../src/postgres/table.ts";
import { createTestDatabase, type TestDatabase } from "../support/postgres/database.ts";
import { pruneAll } from "./prune-all.ts";

let db: TestDatabase;
let pool: pg.Pool;

beforeAll(async () => {
  db = await createTestDatabase();
  pool = new pg.Pool({ connectionString: db.url, max: 2 });
});
afterAll(async () => {
  await pool.end();
  await db.drop();
});

const H = "upgrading.pglease_leases_history";

// Back to what the previous migration left: its prune function verbatim, without what this one adds.
const PREVIOUS = `
  DROP INDEX upgrading.pglease_leases_history_changed_at;
  DROP INDEX upgrading.pglease_leases_history_key_id;
  DROP FUNCTION upgrading.pglease_leases_prune_aged(bigint, integer);
  DROP FUNCTION upgrading.pglease_leases_prune_aged(bigint, integer, timestamptz);
  DROP FUNCTION upgrading.pglease_leases_prune_crowded(integer, bigint, text, integer, integer);
  CREATE OR REPLACE FUNCTION upgrading.pglease_leases_prune_history(max_age_ms bigint, max_rows integer, batch integer)
  RETURNS bigint LANGUAGE sql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $fn$
    WITH ranked AS (
      SELECT id, changed_at, row_number() OVER (PARTITION BY key ORDER BY id DESC) AS newer
        FROM ${H}
    ),
    doomed AS (
      SELECT h.id FROM ${H} h
       WHERE h.id IN (SELECT id FROM ranked
                       WHERE newer > 1
                         AND (newer > max_rows OR changed_at < clock_timestamp() - max_age_ms * interval '1 millisecond'))
       ORDER BY h.id LIMIT batch
       FOR UPDATE SKIP LOCKED
    ),
    gone AS (DELETE FROM ${H} h USING doomed WHERE h.id = doomed.id RETURNING 1)
    SELECT count(*) FROM gone
  $fn$`;

const INDEXES = `
  SELECT array_agg(indexname::text ORDER BY indexname) AS names FROM pg_indexes
   WHERE schemaname = 'upgrading' AND tablename = 'pglease_leases_history'`;

it("migrating a history made before the walk adds its indexes and functions; the old function prunes by age only", async () => {
  const table = leaseTable("upgrading", "pglease_leases");
  await migrate(pool, table);
  const store = new PgLeaseStore({ pool, schema: "upgrading", statementTimeoutMs: 5_000 });
  for (let i = 0; i < 3; i++) {
    const won = await store.claim("k", "a", 10_000);
    if (!won.won) throw new Error("expected to win");
    await store.release("k", "a", won.fence);
  }
  await pool.query(PREVIOUS);

  const error = await assertTablePresent(pool, table).catch((e: unknown) => e);
  expect(error).toBeInstanceOf(HistoryMissingError);
  expect(String(error)).toMatch(
    /missing functions upgrading\.pglease_leases_prune_aged, upgrading\.pglease_leases_prune_crowded, indexes pglease_leases_history_changed_at, pglease_leases_history_key_id;.*run `pglease migrate`/,
  );

  await migrate(pool, table);
  await assertTablePresent(pool, table);
  expect((await pool.query(INDEXES)).rows[0].names).toEqual([
    "pglease_leases_history_changed_at",
    "pglease_leases_history_key_id",
    "pglease_leases_history_pkey",
  ]);
  // Rows per key 1 would leave one entry; by age alone (a day) all six stay, being new.
  const legacy = await pool.query(
    "SELECT upgrading.pglease_leases_prune_history(86400000, 1, 100)::int AS n",
  );
  expect(legacy.rows[0].n).toBe(0);
  await pool.query(`UPDATE ${H} SET changed_at = changed_at - interval '2 days'`);
  const aged = await pool.query(
    "SELECT upgrading.pglease_leases_prune_history(86400000, 1000, 100)::int AS n",
  );
  expect(aged.rows[0].n).toBe(5);

  await store.claim("k", "b", 10_000);
  expect(await pruneAll(pool, table, { maxAgeMs: 86_400_000, maxRowsPerKey: 1 })).toBe(1);
  const kept = await readHistory(pool, table, { limit: 10 });
  expect(kept.map((e) => [e.reason, e.holder])).toEqual([["claim", "b"]]);
});

it("an index a concurrent build left invalid counts as missing, and migrating builds it again", async () => {
  const table = leaseTable("halfbuilt", "pglease_leases");
  await migrate(pool, table);
  const store = new PgLeaseStore({ pool, schema: "halfbuilt", statementTimeoutMs: 5_000 });
  const won = await store.claim("k", "a", 10_000);
  if (won.won) await store.release("k", "a", won.fence);
  await pool.query("DROP INDEX halfbuilt.pglease_leases_history_key_id");
  // Fails on the key's two entries, and leaves the index behind, invalid: what a build cut short leaves.
  await expect(
    pool.query(
      "CREATE UNIQUE INDEX CONCURRENTLY pglease_leases_history_key_id ON halfbuilt.pglease_leases_history (key)",
    ),
  ).rejects.toThrow(/could not create unique index/);
  await expect(assertTablePresent(pool, table)).rejects.toThrow(
    /missing indexes pglease_leases_history_changed_at, pglease_leases_history_key_id/,
  );

  await migrate(pool, table);
  await assertTablePresent(pool, table);
  const { rows } = await pool.query(
    `SELECT pg_get_indexdef(indexrelid) AS def, indisvalid FROM pg_index
      WHERE indexrelid = 'halfbuilt.pglease_leases_history_key_id'::regclass`,
  );
  expect(rows).toEqual([
    {
      def: "CREATE INDEX pglease_leases_history_key_id ON halfbuilt.pglease_leases_history USING btree (key, id DESC)",
      indisvalid: true,
    },
  ]);
});

it("a history migrated by the version before (its age prune without a resume point) gets the resumable one; the old signature still prunes", async () => {
  const table = leaseTable("previous", "pglease_leases");
  await migrate(pool, table);
  await pool.query("DROP FUNCTION previous.pglease_leases_prune_aged(bigint, integer, timestamptz)");
  await expect(assertTablePresent(pool, table)).rejects.toThrow(
    /missing functions previous\.pglease_leases_prune_aged, previous\.pglease_leases_prune_crowded;.*run `pglease migrate`/,
  );
  await migrate(pool, table);
  await assertTablePresent(pool, table);
  const store = new PgLeaseStore({ pool, schema: "previous", statementTimeoutMs: 5_000 });
  for (const holder of ["a", "b"]) {
    const won = await store.claim("k", holder, 10_000);
    if (won.won) await store.release("k", holder, won.fence);
  }
  await pool.query("UPDATE previous.pglease_leases_history SET changed_at = changed_at - interval '2 days'");
  // What a replica not yet upgraded calls: all but the key's newest entry go.
  const { rows } = await pool.query("SELECT previous.pglease_leases_prune_aged(86400000, 100)::int AS n");
  expect(rows[0].n).toBe(3);
});
