// pglease history: the real command as a child process against a real PostgreSQL, on changes of
// hands made by the real store and by `pglease release`.
import pg from "pg";
import { afterAll, beforeAll, expect, it } from "vitest";
import { PgLeaseStore } from "../../src/postgres/store.ts";
import { createTestDatabase, type TestDatabase } from "../support/postgres/database.ts";
import { runPglease } from "../support/processes/cli.ts";

let db: TestDatabase;
let pool: pg.Pool;
let env: NodeJS.ProcessEnv;

beforeAll(async () => {
  db = await createTestDatabase();
  pool = new pg.Pool({ connectionString: db.url, max: 1 });
  env = { DATABASE_URL: db.url };
  expect((await runPglease(["migrate"], env)).code).toBe(0);
  const store = new PgLeaseStore({ pool, statementTimeoutMs: 5_000 });
  const first = await store.claim("orders", "pod-a", 60_000);
  if (first.won) await store.release("orders", "pod-a", first.fence);
  await store.claim("orders", "pod-b", 60_000);
  await store.claim("billing", "pod-a", 60_000);
  // The oldest two entries move two hours back, for --since.
  await pool.query(
    "UPDATE pglease_leases_history SET changed_at = changed_at - interval '2 hours' WHERE id IN (SELECT id FROM pglease_leases_history ORDER BY id LIMIT 2)",
  );
  expect((await runPglease(["release", "orders"], env)).code).toBe(0);
});
afterAll(async () => {
  await pool.end();
  await db.drop();
});

it("prints every change of hands, oldest first, with holder, previous holder and reason", async () => {
  const out = await runPglease(["history"], env);
  expect(out.code).toBe(0);
  const lines = out.stdout.trim().split("\n");
  expect(lines[0]).toMatch(/^TIME\s+LEASE\s+FENCE\s+HOLDER\s+PREVIOUS\s+REASON$/);
  expect(lines.slice(1).map((l) => l.split(/\s+/).slice(1))).toEqual([
    ["orders", "1", "pod-a", "-", "claim"],
    ["orders", "1", "-", "pod-a", "release"],
    ["orders", "2", "pod-b", "pod-a", "claim"],
    ["billing", "3", "pod-a", "-", "claim"],
    ["orders", "2", "-", "pod-b", "forced-release"],
  ]);
});

it("filters by lease and age, and prints JSON with stable names", async () => {
  const out = await runPglease(["history", "orders", "--since", "1h", "--json"], env);
  expect(out.code).toBe(0);
  const { history } = JSON.parse(out.stdout) as { history: Array<Record<string, unknown>> };
  expect(history.map(({ changedAt, ...rest }) => rest)).toEqual([
    { key: "orders", fence: 2, holder: "pod-b", previousHolder: "pod-a", reason: "claim" },
    { key: "orders", fence: 2, holder: null, previousHolder: "pod-b", reason: "forced-release" },
  ]);
  expect(Number.isNaN(Date.parse(String(history[0]?.changedAt)))).toBe(false);
  expect((await runPglease(["history", "nothing-here"], env)).stdout).toBe("no changes of hands recorded\n");
});

it("bad input exits 2 naming every problem", async () => {
  const out = await runPglease(["history", "a", "b", "--since", "forever", "--limit", "0"], env);
  expect(out.code).toBe(2);
  expect(out.stderr).toContain("pglease history takes at most one lease name, got 2");
  expect(out.stderr).toContain('--since: "forever" is not a duration');
  expect(out.stderr).toContain('--limit: "0" must be a whole number from 1 to 100000');
  expect(out.stdout).toBe("");
});

it("a role without SELECT on the history is told the grant, in one line", async () => {
  await pool.query(
    "DO $$ BEGIN CREATE ROLE pglease_cli_reader LOGIN PASSWORD 'pw'; EXCEPTION WHEN duplicate_object THEN NULL; END $$",
  );
  const url = new URL(db.url);
  url.username = "pglease_cli_reader";
  url.password = "pw";
  const out = await runPglease(["history"], { DATABASE_URL: url.toString() });
  expect(out.code).toBe(1);
  expect(out.stderr).toMatch(
    /^pglease history: permission denied for table pglease_leases_history: reading the history needs SELECT on it; as its owner: GRANT SELECT ON "public"."pglease_leases_history" TO <this role>\n$/,
  );
  expect(out.stderr).not.toContain("pw@");
});
