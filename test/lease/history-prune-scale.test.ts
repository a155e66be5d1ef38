// Pruning a large history on a real PostgreSQL: 10,000 keys. No single prune statement may read
// the whole history (ranking every entry does, and at 10,000 keys × 1,000 entries that outlasts the
// statement timeout); the work is measured in tuples read, not in time, so a loaded machine cannot
// make it flaky.
import pg from "pg";
import { afterAll, beforeAll, expect, it } from "vitest";
import { HistoryPruner } from "../../src/postgres/history-pruner.ts";
import { migrate } from "../../src/postgres/migrate.ts";
import { type LeaseTable, leaseTable } from "../../src/postgres/table.ts";
import { createTestDatabase, type TestDatabase } from "../support/postgres/database.ts";

const KEYS = 10_000;
const PER_KEY = 50;

let db: TestDatabase;
let client: pg.Client;

beforeAll(async () => {
  db = await createTestDatabase();
  client = new pg.Client({ connectionString: db.url });
  await client.connect();
});
afterAll(async () => {
  await client.end();
  await db.drop();
});

// Entry n of each key (1 oldest … PER_KEY newest) is PER_KEY - n hours old.
const FILL = (t: LeaseTable) => `
  INSERT INTO ${t.history.table} (key, fence, holder, previous_holder, reason, changed_at)
  SELECT 'key-' || k, k * 1000 + n, 'holder-' || (n % 3), 'holder-' || ((n + 2) % 3), 'expiry-takeover',
         now() - (${PER_KEY} - n) * interval '1 hour'
    FROM generate_series(1, ${PER_KEY}) n, generate_series(1, ${KEYS}) k
   ORDER BY n, k`;

// Tuples the scans of the history and its indexes read on this connection, not yet flushed.
const TUPLES_READ = `
  SELECT (pg_stat_get_xact_tuples_returned(to_regclass($1))
          + coalesce((SELECT sum(pg_stat_get_xact_tuples_returned(indexrelid))
                        FROM pg_index WHERE indrelid = to_regclass($1)), 0))::bigint::text AS n`;

async function tuplesRead(t: LeaseTable): Promise<number> {
  const { rows } = await client.query<{ n: string }>(TUPLES_READ, [t.history.table]);
  return Number(rows[0]?.n);
}

/**
 * The pruner on this connection, each statement in a transaction of its own (as on a pool), noting
 * the tuples it read. The session's counters are flushed only between transactions, so the
 * difference across the statement, inside its transaction, is the statement's own.
 */
function measuredPruner(t: LeaseTable, retention: { maxAgeMs: number; maxRowsPerKey: number }) {
  const perStatement: number[] = [];
  const pool = {
    query: async (...args: Parameters<pg.Client["query"]>) => {
      await client.query("BEGIN");
      const before = await tuplesRead(t);
      const result = await (client.query as (...a: unknown[]) => Promise<unknown>)(...args);
      perStatement.push((await tuplesRead(t)) - before);
      await client.query("COMMIT");
      return result;
    },
  } as unknown as pg.Pool;
  const errors: Error[] = [];
  const pruner = new HistoryPruner({
    pool,
    table: t,
    retention,
    leading: () => true,
    onError: (e) => errors.push(e),
  });
  return { pruner, perStatement, errors };
}

it("at 10,000 keys no prune statement reads more than a tenth of the history, and the runs bring every key within its retention", async () => {
  const t = leaseTable("scale", "pglease_leases");
  await migrate(new pg.Pool({ connectionString: db.url, max: 1 }), t);
  // Vacuumed after every run below, as autovacuum would after a mass delete, but at a known moment:
  // until then any scan reads the deleted entries' index entries too.
  await client.query(`ALTER TABLE ${t.history.table} SET (autovacuum_enabled = false)`);
  await client.query(FILL(t));
  await client.query(`ANALYZE ${t.history.table}`);
  const total = KEYS * PER_KEY;
  // Older than 30 hours: entries 1–19 of each key; beyond the newest 25: entries 1–25.
  const { pruner, perStatement, errors } = measuredPruner(t, { maxAgeMs: 30 * 3_600_000, maxRowsPerKey: 25 });
  // An open transaction elsewhere in the database (any long one; an autovacuum ANALYZE is one
  // too) keeps the entries each batch deletes in the index: the next batches must not read them
  // again. From the oldest end they did, one batch more each time: 102,006 tuples in the 100th
  // batch, and the test failed whenever something held a snapshot during this run.
  const elsewhere = new pg.Client({ connectionString: db.url });
  await elsewhere.connect();
  await elsewhere.query("BEGIN ISOLATION LEVEL REPEATABLE READ");
  await elsewhere.query("SELECT 1");
  let pruned = await pruner.run();
  await elsewhere.query("COMMIT");
  await elsewhere.end();
  expect(Math.max(...perStatement)).toBeLessThan(total / 10);
  await client.query(`VACUUM ${t.history.table}`);
  for (let run = 0; run < 100; run++) {
    const more = await pruner.run();
    await client.query(`VACUUM ${t.history.table}`);
    pruned += more;
    if (more === 0) break;
  }
  expect(errors).toEqual([]);
  expect(Math.max(...perStatement)).toBeLessThan(total / 10);
  expect(pruned).toBe(KEYS * (PER_KEY - 25));
  const { rows } = await client.query(
    `SELECT min(n)::int AS min, max(n)::int AS max, count(*)::int AS keys FROM (
       SELECT count(*) AS n FROM ${t.history.table} GROUP BY key) per_key`,
  );
  expect(rows[0]).toEqual({ min: 25, max: 25, keys: KEYS });

  // The first two walks read every key (the first may miss an entry still being written); from the
  // third on only the keys grown since the walk before last, the others one index entry or two each.
  for (let run = 0; run < 2; run++) expect(await pruner.run()).toBe(0);
  await client.query(`${FILL(t).replace(`generate_series(1, ${KEYS}) k`, "generate_series(7, 7) k")}`);
  perStatement.length = 0;
  expect(await pruner.run()).toBe(PER_KEY);
  expect(perStatement.reduce((a, b) => a + b, 0)).toBeLessThan(KEYS * 3);
  expect(errors).toEqual([]);
}, 300_000);
