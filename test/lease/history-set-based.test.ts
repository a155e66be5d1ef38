// The batched release's history, set-based, on a real PostgreSQL: one trigger call records every
// term the statement ends (the per-row trigger made close() of 10,000 leases cost 10,000 PL/pgSQL
// calls), renewals call no history function, and a table whose history an older pglease made
// (its update trigger records every ended term per row) is upgraded in place and still records
// every change of hands, once.
import type pg from "pg";
import { afterAll, beforeAll, expect, it } from "vitest";
import { HandoverStore } from "../../src/postgres/handover.ts";
import { readHistory } from "../../src/postgres/history-store.ts";
import { assertTablePresent, HistoryMissingError, migrate } from "../../src/postgres/migrate.ts";
import { createLeasePool } from "../../src/postgres/pool.ts";
import { PgLeaseStore } from "../../src/postgres/store.ts";
import { type LeaseTable, leaseTable } from "../../src/postgres/table.ts";
import { createTestDatabase, type TestDatabase } from "../support/postgres/database.ts";

let db: TestDatabase;
let pool: pg.Pool;

beforeAll(async () => {
  db = await createTestDatabase();
  // One connection: the function-call counts below are this session's, inside one transaction.
  pool = createLeasePool({ connectionString: db.url, max: 1, onIdleError: () => {} });
});
afterAll(async () => {
  await pool.end();
  await db.drop();
});

// The update trigger an older pglease created, verbatim: every ended term recorded per row.
const OLD_UPDATE_TRIGGER = (t: LeaseTable) => `
  CREATE TRIGGER pglease_history_update BEFORE UPDATE ON ${t.qualified}
  FOR EACH ROW WHEN (OLD.fence IS DISTINCT FROM NEW.fence OR OLD.holder IS DISTINCT FROM NEW.holder
                     OR NEW.expires_at < OLD.expires_at)
  EXECUTE FUNCTION ${t.history.recordFunction}()`;

/** The history as an older pglease left it: no statement-level trigger, the per-row update trigger. */
async function makeOldHistory(t: LeaseTable): Promise<void> {
  await migrate(pool, t);
  await pool.query(`DROP TRIGGER pglease_history_ended ON ${t.qualified}`);
  await pool.query(`DROP FUNCTION ${t.history.recordEndedFunction}()`);
  await pool.query(`DROP TRIGGER pglease_history_update ON ${t.qualified}`);
  await pool.query(OLD_UPDATE_TRIGGER(t));
}

/** Calls of the history functions made by `work`, counted by the server for this transaction. */
async function historyCalls(t: LeaseTable, work: () => Promise<void>): Promise<number> {
  await pool.query("BEGIN");
  try {
    await pool.query("SET LOCAL track_functions = 'pl'");
    await work();
    const { rows } = await pool.query<{ calls: string }>(
      `SELECT (coalesce(pg_stat_get_xact_function_calls(to_regprocedure($1)), 0)
             + coalesce(pg_stat_get_xact_function_calls(to_regprocedure($2)), 0))::text AS calls`,
      [`${t.history.recordFunction}()`, `${t.history.recordEndedFunction}()`],
    );
    return Number(rows[0]?.calls);
  } finally {
    await pool.query("ROLLBACK");
  }
}

async function holdMany(store: PgLeaseStore, prefix: string, count: number) {
  const terms: { key: string; fence: number }[] = [];
  for (let i = 0; i < count; i++) {
    const answer = await store.claim(`${prefix}${i}`, "h", 60_000);
    if (!answer.won) throw new Error("setup: claim lost");
    terms.push({ key: `${prefix}${i}`, fence: answer.fence });
  }
  return terms;
}

it("a batched release of 200 terms is recorded by one trigger call; renewals, single and batched, call none", async () => {
  const t = leaseTable("public", "set_based_calls");
  await migrate(pool, t);
  const store = new PgLeaseStore({ pool, table: t.table, statementTimeoutMs: 10_000 });
  const terms = await holdMany(store, "c", 200);
  expect(
    await historyCalls(t, async () => {
      expect((await store.renewMany("h", terms, 60_000)).size).toBe(200);
      expect((await store.renew("c0", "h", terms[0]?.fence ?? 0, 60_000)).renewed).toBe(true);
    }),
  ).toBe(0);
  expect(
    await historyCalls(t, async () => {
      expect((await store.releaseMany("h", terms)).size).toBe(200);
    }),
  ).toBe(1);
  // Rolled back above; now for real: each term ended once, in the history's words.
  await store.releaseMany("h", terms);
  const entries = await readHistory(pool, t, { limit: 1_000 });
  const ended = entries.filter((e) => e.holder === null);
  expect(ended).toHaveLength(200);
  expect(new Set(ended.map((e) => `${e.key}/${e.fence}/${e.previousHolder}/${e.reason}`))).toEqual(
    new Set(terms.map((term) => `${term.key}/${term.fence}/h/release`)),
  );
});

it("a history made by an older pglease is upgraded in place and records every change of hands once, renewals none", async () => {
  const t = leaseTable("public", "set_based_upgraded");
  await makeOldHistory(t);
  const error = await assertTablePresent(pool, t).catch((e: unknown) => e);
  expect(error).toBeInstanceOf(HistoryMissingError);
  expect(String(error)).toMatch(
    /missing function public\.set_based_upgraded_record_ended, trigger pglease_history_update of this version, trigger pglease_history_ended;/,
  );
  await migrate(pool, t);
  await migrate(pool, t); // idempotent: the second finds it complete
  await assertTablePresent(pool, t);
  const { rows } = await pool.query<{ triggers: string[] }>(
    `SELECT array_agg(tgname::text ORDER BY tgname) AS triggers FROM pg_trigger
      WHERE tgrelid = to_regclass($1) AND NOT tgisinternal`,
    [t.qualified],
  );
  expect(rows[0]?.triggers).toEqual([
    "pglease_history_delete",
    "pglease_history_ended",
    "pglease_history_insert",
    "pglease_history_update",
  ]);

  const store = new PgLeaseStore({ pool, table: t.table, statementTimeoutMs: 10_000 });
  const handovers = new HandoverStore(pool, t, 10_000);
  const history = async (key: string) =>
    (await readHistory(pool, t, { key, limit: 100 })).map((e) => [
      e.fence,
      e.holder,
      e.previousHolder,
      e.reason,
    ]);
  const won = async (key: string, holder: string) => {
    const answer = await store.claim(key, holder, 60_000);
    if (!answer.won) throw new Error(`expected ${holder} to win ${key}`);
    return answer.fence;
  };

  // A claim, renewals of every kind, a release, a claim after it, a handover, a new term, a
  // forced release, a batched release, an expiry takeover.
  const f1 = await won("k", "a");
  expect((await store.renew("k", "a", f1, 60_000)).renewed).toBe(true);
  expect((await store.renewMany("a", [{ key: "k", fence: f1 }], 60_000)).size).toBe(1);
  expect(await store.release("k", "a", f1)).toBe(true);
  const f2 = await won("k", "b");
  expect(await handovers.reserve("k", f2, "c", 30_000)).not.toBeNull();
  expect(await store.release("k", "b", f2)).toBe(true);
  const f3 = await won("k", "c");
  const f4 = await won("k", "c");
  expect(await store.forceRelease("k")).toEqual({ holder: "c", fence: f4 });
  const f5 = await won("k", "d");
  expect((await store.releaseMany("d", [{ key: "k", fence: f5 }])).get("k")).toBe(f5);
  const f6 = await won("k", "e");
  await pool.query(`ALTER TABLE ${t.qualified} DISABLE TRIGGER pglease_history_update`);
  try {
    await pool.query(
      `UPDATE ${t.qualified} SET acquired_at = clock_timestamp() - interval '2 seconds',
                                  expires_at = clock_timestamp() - interval '1 second' WHERE key = 'k'`,
    );
  } finally {
    await pool.query(`ALTER TABLE ${t.qualified} ENABLE TRIGGER pglease_history_update`);
  }
  const f7 = await won("k", "f");
  expect(await history("k")).toEqual([
    [f1, "a", null, "claim"],
    [f1, null, "a", "release"],
    [f2, "b", "a", "claim"],
    [f2, null, "b", "release"],
    [f3, "c", "b", "handover"],
    [f4, "c", "c", "new-term"],
    [f4, null, "c", "forced-release"],
    [f5, "d", "c", "claim"],
    [f5, null, "d", "release"],
    [f6, "e", "d", "claim"],
    [f7, "f", "e", "expiry-takeover"],
  ]);
});

it("an operator's UPDATE by hand that ends many terms is recorded per term, named set-based or not", async () => {
  const t = leaseTable("public", "set_based_by_hand");
  await migrate(pool, t);
  const store = new PgLeaseStore({ pool, table: t.table, statementTimeoutMs: 10_000 });
  await holdMany(store, "m", 3);
  const endAll = `UPDATE ${t.qualified} SET expires_at = clock_timestamp(),
                         acquired_at = least(acquired_at, clock_timestamp() - interval '1 microsecond')`;
  await pool.query(endAll);
  await holdMany(store, "m", 3);
  // Named set-based for the whole transaction: the statement-level trigger records them instead.
  await pool.query("BEGIN");
  await pool.query("SELECT set_config('pglease.set_based', 'on', true)");
  await pool.query(endAll);
  await pool.query("COMMIT");
  const entries = await readHistory(pool, t, { limit: 100 });
  expect(entries.map((e) => [e.key, e.holder, e.reason])).toEqual([
    ["m0", "h", "claim"],
    ["m1", "h", "claim"],
    ["m2", "h", "claim"],
    ...["m0", "m1", "m2"].map((key) => [key, null, "release"]),
    ["m0", "h", "claim"],
    ["m1", "h", "claim"],
    ["m2", "h", "claim"],
    ...["m0", "m1", "m2"].map((key) => [key, null, "release"]),
  ]);
});

it("a lease role granted only the table and the sequence releases many terms; the statement-level trigger records them", async () => {
  const t = leaseTable("set_based_granted", "pglease_leases");
  await migrate(pool, t);
  await pool.query(
    "DO $$ BEGIN CREATE ROLE pglease_set_based_user LOGIN PASSWORD 'pw'; EXCEPTION WHEN duplicate_object THEN NULL; END $$",
  );
  await pool.query("GRANT USAGE ON SCHEMA set_based_granted TO pglease_set_based_user");
  await pool.query(
    "GRANT SELECT, INSERT, UPDATE ON set_based_granted.pglease_leases TO pglease_set_based_user",
  );
  await pool.query(
    "GRANT USAGE ON SEQUENCE set_based_granted.pglease_leases_fence TO pglease_set_based_user",
  );
  const url = new URL(db.url);
  url.username = "pglease_set_based_user";
  url.password = "pw";
  const restricted = createLeasePool({ connectionString: url.toString(), max: 1, onIdleError: () => {} });
  try {
    const store = new PgLeaseStore({ pool: restricted, schema: t.schema, statementTimeoutMs: 10_000 });
    const terms = await holdMany(store, "g", 3);
    expect((await store.releaseMany("h", terms)).size).toBe(3);
  } finally {
    await restricted.end();
  }
  expect((await readHistory(pool, t, { limit: 10 })).map((e) => [e.key, e.holder, e.reason])).toEqual([
    ["g0", "h", "claim"],
    ["g1", "h", "claim"],
    ["g2", "h", "claim"],
    ["g0", null, "release"],
    ["g1", null, "release"],
    ["g2", null, "release"],
  ]);
});
