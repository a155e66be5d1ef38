// pglease status on a database without the table, and status filtered by lease name: the
// real command as a child process against a real PostgreSQL.
import pg from "pg";
import { afterAll, beforeAll, expect, it } from "vitest";
import { createTestDatabase, type TestDatabase } from "../support/postgres/database.ts";
import { runPglease } from "../support/processes/cli.ts";

let db: TestDatabase;
let admin: pg.Pool;

beforeAll(async () => {
  db = await createTestDatabase();
  admin = new pg.Pool({ connectionString: db.url, max: 1 });
});
afterAll(async () => {
  await admin.end();
  await db.drop();
});

it("status before any migration says to run pglease migrate, in one line without a stack trace", async () => {
  const out = await runPglease(["status"], { DATABASE_URL: db.url });
  expect(out.code).toBe(1);
  expect(out.stderr).toMatch(
    /^pglease status: relation "public.pglease_leases" does not exist: the lease table has not been created yet: run `pglease migrate`/,
  );
  expect(out.stderr.trim().split("\n")).toHaveLength(1);
});

it("status KEY ... shows only the named leases, and a name that does not exist exits 1", async () => {
  const env = { DATABASE_URL: db.url };
  expect((await runPglease(["migrate"], env)).code).toBe(0);
  await admin.query(
    `INSERT INTO pglease_leases (key, holder, fence, acquired_at, expires_at)
     SELECT k, 'pod-' || k, 3, clock_timestamp(), clock_timestamp() + interval '1 minute'
       FROM unnest(ARRAY['alpha', 'beta', 'gamma']) AS k`,
  );
  const two = await runPglease(["status", "--json", "alpha", "gamma"], env);
  expect(two.code).toBe(0);
  expect(JSON.parse(two.stdout).leases.map((l: { key: string }) => l.key)).toEqual(["alpha", "gamma"]);

  const table = await runPglease(["status", "beta"], env);
  expect(table.stdout.trim().split("\n")).toHaveLength(2);
  expect(table.stdout).toMatch(/^beta\s+pod-beta\s+3\s/m);

  const missing = await runPglease(["status", "alpha", "nope"], env);
  expect(missing.code).toBe(1);
  expect(missing.stderr).toBe('pglease status: no lease named "nope"\n');
  expect(missing.stdout).toMatch(/^alpha\s/m);
});
