import pg from "pg";
import { afterAll, beforeAll, expect, it } from "vitest";
import { createTestDatabase, type TestDatabase } from "../support/database.ts";

let db: TestDatabase;
beforeAll(async () => {
  db = await createTestDatabase();
});
afterAll(async () => {
  await db.drop();
});

it("reaches a real PostgreSQL", async () => {
  const c = new pg.Client({ connectionString: db.url });
  await c.connect();
  const r = await c.query("select current_database() as d");
  await c.end();
  expect(r.rows[0].d).toBe(db.name);
});
