// The pruner runs only in a process that leads, one run at a time, against a real PostgreSQL.
import pg from "pg";
import { afterAll, beforeAll, expect, it } from "vitest";
import { HistoryPruner } from "../../src/postgres/history-pruner.ts";
import { readHistory } from "../../src/postgres/history-store.ts";
import { migrate } from "../../src/postgres/migrate.ts";
import { PgLeaseStore } from "../../src/postgres/store.ts";
import { createTestDatabase, type TestDatabase } from "../support/postgres/database.ts";

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

it("prunes to the retention only while leading, and two runs at once share one", async () => {
  const store = new PgLeaseStore({ pool, statementTimeoutMs: 5_000 });
  await migrate(pool, store.table);
  for (let i = 0; i < 4; i++) {
    const won = await store.claim("k", "a", 10_000);
    if (won.won) await store.release("k", "a", won.fence);
  }
  let leading = false;
  const errors: Error[] = [];
  const pruner = new HistoryPruner({
    pool,
    table: store.table,
    retention: { maxAgeMs: 86_400_000, maxRowsPerKey: 3 },
    leading: () => leading,
    onError: (e) => errors.push(e),
  });
  expect(await pruner.run()).toBe(0);
  expect(await readHistory(pool, store.table, { limit: 100 })).toHaveLength(8);
  leading = true;
  const [first, second] = await Promise.all([pruner.run(), pruner.run()]);
  expect([first, second]).toEqual([5, 5]);
  expect(await readHistory(pool, store.table, { limit: 100 })).toHaveLength(3);
  await pruner.stop();
  expect(errors).toEqual([]);
});
