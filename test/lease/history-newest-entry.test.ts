// The claim trigger tells a free lease from a takeover by the key's newest history entry, read
// through the pruning index on (key, id DESC), instead of looking for a release of the term
// through an index on (key, fence) that every change of hands had to write: a batched release of
// 10,000 terms wrote 10,000 entries into four indexes. On a real PostgreSQL: a history an older
// pglease made (its record function, its (key, fence) index) is upgraded by the migration, once,
// and records every reason as before; a batched release of 10,000 terms is recorded once per term.
import pg from "pg";
import { afterAll, beforeAll, expect, it } from "vitest";
import { RESTART_PROOF_PATTERN } from "../../src/election/identity.ts";
import { readHistory } from "../../src/postgres/history-store.ts";
import { assertTablePresent, migrate } from "../../src/postgres/migrate.ts";
import { PgLeaseStore } from "../../src/postgres/store.ts";
import { type LeaseTable, leaseTable } from "../../src/postgres/table.ts";
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

// The record function of the pglease before, verbatim: a term's release looked up by (key, fence).
const PREVIOUS_RECORD_FUNCTION = (t: LeaseTable) => `
  CREATE OR REPLACE FUNCTION ${t.history.recordFunction}() RETURNS trigger
  LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $fn$
  DECLARE
    named text := nullif(current_setting('pglease.reason', true), '');
    why text;
  BEGIN
    IF TG_OP = 'INSERT' THEN
      INSERT INTO ${t.history.table} (key, fence, holder, previous_holder, reason, changed_at)
      VALUES (NEW.key, NEW.fence, NEW.holder, NULL, coalesce(named, 'claim'), clock_timestamp());
      RETURN NULL;
    END IF;
    IF TG_OP = 'DELETE' THEN
      INSERT INTO ${t.history.table} (key, fence, holder, previous_holder, reason, changed_at)
      VALUES (OLD.key, OLD.fence, NULL, OLD.holder, coalesce(named, 'deleted'), clock_timestamp());
      RETURN OLD;
    END IF;
    IF NEW.fence = OLD.fence AND NEW.holder = OLD.holder THEN
      INSERT INTO ${t.history.table} (key, fence, holder, previous_holder, reason, changed_at)
      VALUES (OLD.key, OLD.fence, NULL, OLD.holder, coalesce(named, 'release'), clock_timestamp());
      RETURN NEW;
    END IF;
    why := coalesce(named, CASE
      WHEN OLD.reserved_for = NEW.holder AND OLD.reserved_until > NEW.acquired_at THEN 'handover'
      WHEN EXISTS (SELECT 1 FROM ${t.history.table} h
                    WHERE h.key = OLD.key AND h.fence = OLD.fence AND h.holder IS NULL) THEN 'claim'
      WHEN NEW.holder = OLD.holder THEN 'new-term'
      WHEN OLD.expires_at <= NEW.acquired_at THEN 'expiry-takeover'
      WHEN (regexp_match(OLD.holder, '${RESTART_PROOF_PATTERN}'))[1] = (regexp_match(NEW.holder, '${RESTART_PROOF_PATTERN}'))[1]
        THEN 'restart-takeover'
      ELSE 'session-takeover' END);
    INSERT INTO ${t.history.table} (key, fence, holder, previous_holder, reason, changed_at)
    VALUES (NEW.key, NEW.fence, NEW.holder, OLD.holder, why, clock_timestamp());
    PERFORM set_config('pglease.change', json_build_object('reason', why, 'previous_holder', OLD.holder)::text, true);
    RETURN NEW;
  END $fn$`;

/** The history as the pglease before left it: its record function and its (key, fence) index. */
async function makePrevious(t: LeaseTable): Promise<void> {
  await migrate(pool, t);
  await pool.query(PREVIOUS_RECORD_FUNCTION(t));
  await pool.query(`CREATE INDEX "${t.history.name}_key_fence" ON ${t.history.table} (key, fence)`);
}

async function indexes(t: LeaseTable): Promise<string[]> {
  const { rows } = await pool.query<{ names: string[] }>(
    "SELECT array_agg(indexname::text ORDER BY indexname) AS names FROM pg_indexes WHERE schemaname = $1 AND tablename = $2",
    [t.schema, t.history.name],
  );
  return rows[0]?.names ?? [];
}

/** The record function's catalog row version: CREATE OR REPLACE writes a new one. */
async function recordFunctionVersion(t: LeaseTable): Promise<string> {
  const { rows } = await pool.query<{ xmin: string }>(
    "SELECT xmin::text FROM pg_proc WHERE oid = to_regprocedure($1)",
    [`${t.history.recordFunction}()`],
  );
  return rows[0]?.xmin ?? "absent";
}

it("a history made by the pglease before loses its (key, fence) index to the migration, once, and records every reason as before", async () => {
  const t = leaseTable("newest_upgrade", "pglease_leases");
  await makePrevious(t);
  // The previous record function is still correct: this version starts on it with migrations off.
  await assertTablePresent(pool, t);
  const previous = await recordFunctionVersion(t);

  await migrate(pool, t);
  expect(await indexes(t)).toEqual([
    "pglease_leases_history_changed_at",
    "pglease_leases_history_key_id",
    "pglease_leases_history_pkey",
  ]);
  const upgraded = await recordFunctionVersion(t);
  expect(upgraded).not.toBe(previous);
  // Idempotent: the second finds it complete and replaces nothing.
  await migrate(pool, t);
  expect(await recordFunctionVersion(t)).toBe(upgraded);
  await assertTablePresent(pool, t);

  const store = new PgLeaseStore({ pool, schema: t.schema, statementTimeoutMs: 10_000 });
  const won = async (key: string, holder: string) => {
    const answer = await store.claim(key, holder, 60_000);
    if (!answer.won) throw new Error(`expected ${holder} to win ${key}`);
    return answer;
  };
  const expire = (key: string) =>
    pool.query(
      `UPDATE ${t.qualified} SET acquired_at = clock_timestamp() - interval '2 seconds',
                                expires_at = clock_timestamp() - interval '1 second' WHERE key = $1`,
      [key],
    );
  // Each claim answers its reason from the trigger, as the log line reads it.
  const a1 = await won("k", "a");
  expect(await store.release("k", "a", a1.fence)).toBe(true);
  const b2 = await won("k", "b");
  expect(b2.change?.reason).toBe("claim");
  // An expiry that shortens the term by hand is recorded as its end: the next claim finds the lease free.
  await expire("k");
  const c3 = await won("k", "c");
  expect(c3.change?.reason).toBe("claim");
  // The same holder again after its term ended by a batched release: free, so a claim.
  expect((await store.releaseMany("c", [{ key: "k", fence: c3.fence }])).get("k")).toBe(c3.fence);
  const c4 = await won("k", "c");
  expect(c4.change?.reason).toBe("claim");
  // A live term whose holder claims again: a new term; then one expired unrecorded, taken over by another.
  expect((await won("k", "c")).change?.reason).toBe("new-term");
  await pool.query(`ALTER TABLE ${t.qualified} DISABLE TRIGGER pglease_history_update`);
  try {
    await expire("k");
  } finally {
    await pool.query(`ALTER TABLE ${t.qualified} ENABLE TRIGGER pglease_history_update`);
  }
  expect((await won("k", "d")).change?.reason).toBe("expiry-takeover");
  const entries = await readHistory(pool, t, { key: "k", limit: 100 });
  expect(entries.map((e) => [e.holder, e.previousHolder, e.reason])).toEqual([
    ["a", null, "claim"],
    [null, "a", "release"],
    ["b", "a", "claim"],
    [null, "b", "release"],
    ["c", "b", "claim"],
    [null, "c", "release"],
    ["c", "c", "claim"],
    ["c", "c", "new-term"],
    ["d", "c", "expiry-takeover"],
  ]);
});

it("a batched release of 10,000 terms records each ended term once; stale terms none; the next claims find them free", async () => {
  const t = leaseTable("newest_batch", "pglease_leases");
  await migrate(pool, t);
  const count = 10_000;
  // One statement claims them all (the insert trigger records each claim), fences from the sequence.
  const { rows } = await pool.query<{ key: string; fence: string }>(
    `INSERT INTO ${t.qualified} (key, holder, fence, acquired_at, expires_at)
     SELECT 'b' || i, 'h', nextval('${t.fenceSequence}'), clock_timestamp(), clock_timestamp() + interval '1 hour'
       FROM generate_series(1, $1::int) i RETURNING key, fence::text`,
    [count],
  );
  await pool.query(`ANALYZE ${t.qualified}`);
  const terms = rows.map((row) => ({ key: row.key, fence: Number(row.fence) }));
  // Ten of them named with a stale fence: not released, not recorded.
  const stale = new Set(terms.slice(0, 10).map((term) => term.key));
  const asked = terms.map((term) => (stale.has(term.key) ? { key: term.key, fence: term.fence - 1 } : term));
  const store = new PgLeaseStore({ pool, schema: t.schema, statementTimeoutMs: 30_000 });
  const released = await store.releaseMany("h", asked);
  expect(released.size).toBe(count - stale.size);

  const { rows: ended } = await pool.query<{
    entries: number;
    terms: number;
    wrong: number;
    of_stale: number;
  }>(
    `SELECT count(*)::int AS entries, count(DISTINCT (key, fence))::int AS terms,
            count(*) FILTER (WHERE previous_holder <> 'h' OR reason <> 'release')::int AS wrong,
            count(*) FILTER (WHERE key = ANY($1))::int AS of_stale
       FROM ${t.history.table} WHERE holder IS NULL`,
    [[...stale]],
  );
  expect(ended[0]).toEqual({ entries: count - stale.size, terms: count - stale.size, wrong: 0, of_stale: 0 });
  const { rows: unmatched } = await pool.query<{ n: number }>(
    `SELECT count(*)::int AS n FROM unnest($1::text[], $2::bigint[]) AS term(key, fence)
      WHERE NOT EXISTS (SELECT 1 FROM ${t.history.table} h
                         WHERE h.key = term.key AND h.fence = term.fence AND h.holder IS NULL)`,
    [[...released.keys()], [...released.values()]],
  );
  expect(unmatched[0]?.n).toBe(0);

  // A released lease is free to its next claimant; a stale-fenced one is still held.
  const next = await store.claim("b11", "other", 60_000);
  expect(next.won && next.change?.reason).toBe("claim");
  expect((await store.claim("b1", "other", 60_000)).won).toBe(false);
});

it("a lease role that owns nothing migrates a history the pglease before made: it keeps that function and its index, and claims are recorded as before", async () => {
  const t = leaseTable("newest_unowned", "pglease_leases");
  await makePrevious(t);
  await pool.query(`ALTER TABLE ${t.qualified} SET (fillfactor = 90)`);
  await pool.query(
    "DO $$ BEGIN CREATE ROLE pglease_newest_user LOGIN PASSWORD 'pw'; EXCEPTION WHEN duplicate_object THEN NULL; END $$",
  );
  await pool.query(
    `GRANT USAGE ON SCHEMA ${t.schema} TO pglease_newest_user; ` +
      `GRANT SELECT, INSERT, UPDATE ON ${t.qualified} TO pglease_newest_user; ` +
      `GRANT USAGE ON SEQUENCE ${t.fenceSequence} TO pglease_newest_user`,
  );
  const url = new URL(db.url);
  url.username = "pglease_newest_user";
  url.password = "pw";
  const restricted = new pg.Pool({ connectionString: url.toString(), max: 1 });
  const previous = await recordFunctionVersion(t);
  try {
    // A replica's start with migrations on (the default): what it cannot change it leaves as it is.
    await migrate(restricted, t);
    expect(await recordFunctionVersion(t)).toBe(previous);
    expect(await indexes(t)).toContain("pglease_leases_history_key_fence");
    const reloptions = await pool.query("SELECT reloptions AS o FROM pg_class WHERE oid = $1::regclass", [
      t.qualified,
    ]);
    expect(reloptions.rows[0]?.o).toEqual(["fillfactor=90"]);
    const store = new PgLeaseStore({ pool: restricted, schema: t.schema, statementTimeoutMs: 10_000 });
    const a = await store.claim("k", "a", 60_000);
    if (!a.won) throw new Error("expected a to win");
    expect(await store.release("k", "a", a.fence)).toBe(true);
    const b = await store.claim("k", "b", 60_000);
    expect(b.won && b.change?.reason).toBe("claim");
  } finally {
    await restricted.end();
  }
  // The owner's migration then upgrades both.
  await migrate(pool, t);
  expect(await recordFunctionVersion(t)).not.toBe(previous);
  expect(await indexes(t)).not.toContain("pglease_leases_history_key_fence");
});

it("a reader of the history (a pg_dump, a long report) keeps the (key, fence) index for the next migration instead of making every change of hands wait behind the drop", async () => {
  const t = leaseTable("newest_read", "pglease_leases");
  await makePrevious(t);
  const store = new PgLeaseStore({ pool, schema: t.schema, statementTimeoutMs: 10_000 });
  const reader = new pg.Client({ connectionString: db.url });
  await reader.connect();
  try {
    // As pg_dump does: ACCESS SHARE on the history until its transaction ends.
    await reader.query(`BEGIN; SELECT count(*) FROM ${t.history.table}`);
    const previous = await recordFunctionVersion(t);
    // On the code before, the DROP INDEX waited here for the reader up to the migration's 60 s lock timeout.
    await migrate(pool, t);
    expect(await recordFunctionVersion(t)).not.toBe(previous);
    expect(await indexes(t)).toContain("pglease_leases_history_key_fence");
    // The new function with the index still there: every reason as before, the reader still open.
    const a = await store.claim("k", "a", 60_000);
    if (!a.won) throw new Error("expected a to win");
    expect(await store.release("k", "a", a.fence)).toBe(true);
    const b = await store.claim("k", "b", 60_000);
    expect(b.won && b.change?.reason).toBe("claim");
  } finally {
    await reader.query("COMMIT");
    await reader.end();
  }
  // The next migration, unhindered, drops it.
  await migrate(pool, t);
  expect(await indexes(t)).not.toContain("pglease_leases_history_key_fence");
});
