// Session takeover records the notice connection's server session; behind a transaction-mode
// PgBouncer that connection's backend can change while it looks alive (here: its backend is
// terminated, and PgBouncer answers the next query from another). With session takeover the
// feed's ping sees the other backend and counts it as a drop, instead of leaving a recorded
// session that is gone while the process lives.
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { migrate } from "../../src/postgres/migrate.ts";
import { PgReleaseFeed } from "../../src/postgres/release-feed.ts";
import { leaseTable } from "../../src/postgres/table.ts";
import { createTestDatabase, type TestDatabase } from "../support/postgres/database.ts";
import { type Bouncer, PGBOUNCER, startPgBouncer } from "../support/postgres/pgbouncer.ts";
import { skipBecause } from "../support/skip.ts";

const MISSING = "pgbouncer is not installed (apt-get install pgbouncer; .ci/run does)";
if (!PGBOUNCER && process.env.CI === "true")
  throw new Error(`[pgbouncer session suite] cannot run in CI: ${MISSING}`);
const skip = skipBecause("pgbouncer session suite", !PGBOUNCER && MISSING);

describe.skipIf(skip)("the notice session behind a transaction-mode PgBouncer", () => {
  let db: TestDatabase;
  let bouncer: Bouncer;
  let admin: pg.Pool;
  const table = leaseTable();

  beforeAll(async () => {
    db = await createTestDatabase();
    admin = new pg.Pool({ connectionString: db.url, max: 1 });
    await migrate(admin, table);
    bouncer = await startPgBouncer(db.url, 2);
  });

  afterAll(async () => {
    await bouncer?.stop();
    await admin?.end();
    await db?.drop();
  });

  it("a ping answered by another backend than the recorded session is a drop under session takeover", async () => {
    const errors: Error[] = [];
    const feed = new PgReleaseFeed({
      connection: { connectionString: bouncer.url },
      table,
      pinnedSession: true,
      pingIntervalMs: 100,
      onError: (error) => errors.push(error),
    });
    await feed.start();
    try {
      const recorded = feed.session();
      if (!recorded) throw new Error("no session recorded");
      await admin.query("SELECT pg_terminate_backend($1)", [recorded.pid]);
      await expect.poll(() => errors.map((e) => e.name), { timeout: 10_000 }).toContain("SessionMoved");
      expect(errors.find((e) => e.name === "SessionMoved")?.message).toMatch(
        /^the notice connection's server session moved from backend \d+ to \d+ \(a pooler between pglease and PostgreSQL\?\): session takeover needs a direct connection$/,
      );
    } finally {
      await feed.close();
    }
  });
});
