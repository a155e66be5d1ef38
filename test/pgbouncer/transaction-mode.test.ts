// What the README promises behind PgBouncer in transaction mode (1.18 here: no prepared
// statements): every lease statement with --no-prepared-statements, the fence guard, and a
// controller handover with --no-notify, followers polling.
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createFenceGuard, StaleFenceError } from "../../src/fence/index.ts";
import { migrate } from "../../src/postgres/migrate.ts";
import { createLeasePool } from "../../src/postgres/pool.ts";
import { PgLeaseStore } from "../../src/postgres/store.ts";
import { createTestDatabase, type TestDatabase } from "../support/postgres/database.ts";
import { freePort } from "../support/postgres/embedded-postgres.ts";
import { type Bouncer, PGBOUNCER, startPgBouncer } from "../support/postgres/pgbouncer.ts";
import { fatalText, runPglease, startPglease } from "../support/processes/cli.ts";
import { skipBecause } from "../support/skip.ts";

const MISSING = "pgbouncer is not installed (apt-get install pgbouncer; .ci/run does)";
if (!PGBOUNCER && process.env.CI === "true")
  throw new Error(`[pgbouncer suite] cannot run in CI: ${MISSING}`);
const skip = skipBecause("pgbouncer suite", !PGBOUNCER && MISSING);

describe.skipIf(skip)("behind PgBouncer in transaction mode", () => {
  let db: TestDatabase;
  let bouncer: Bouncer;

  beforeAll(async () => {
    db = await createTestDatabase();
    // Behind a transaction-mode PgBouncer the server-side timeouts come from the role (it refuses
    // them as startup parameters); set before PgBouncer opens its server connections.
    const admin = new pg.Client({ connectionString: db.url });
    await admin.connect();
    const role = (await admin.query<{ r: string }>("SELECT current_user AS r")).rows[0]?.r;
    await admin.query(`ALTER ROLE "${role}" IN DATABASE ${db.name} SET statement_timeout = '500ms'`);
    await admin.query(`ALTER ROLE "${role}" IN DATABASE ${db.name} SET lock_timeout = '500ms'`);
    await admin.end();
    bouncer = await startPgBouncer(db.url, 2);
  });

  afterAll(async () => {
    await bouncer?.stop();
    await db?.drop();
  });

  it("every lease statement works with unnamed statements, many callers sharing two server connections", async () => {
    const pool = createLeasePool({ connectionString: bouncer.url, max: 6 });
    try {
      const store = new PgLeaseStore({ pool, statementTimeoutMs: 5_000, preparedStatements: false });
      await migrate(pool, store.table);
      let fence = 0;
      for (let round = 0; round < 20; round++) {
        const answers = await Promise.all(
          Array.from({ length: 6 }, (_, i) => store.claim(`bounced-${i}`, `holder-${round}`, 10_000)),
        );
        for (const [i, answer] of answers.entries()) {
          if (!answer.won) throw new Error(`bounced-${i} was not released in the round before`);
          if (i === 0) {
            expect(answer.fence).toBeGreaterThan(fence);
            fence = answer.fence;
          }
          expect(await store.renew(`bounced-${i}`, `holder-${round}`, answer.fence, 10_000)).toMatchObject({
            renewed: true,
          });
          expect(await store.release(`bounced-${i}`, `holder-${round}`, answer.fence)).toBe(true);
        }
      }
      expect((await store.read("bounced-0"))?.fence).toBe(fence);
      expect((await store.renewMany("nobody", [{ key: "bounced-0", fence }], 1_000)).size).toBe(0);
    } finally {
      await pool.end();
    }
  });

  it("the fence guard's transaction holds together through it", async () => {
    const pool = createLeasePool({ connectionString: bouncer.url, max: 4 });
    try {
      const guard = createFenceGuard({ pool });
      await guard.migrate();
      await guard.run("bounced-resource", 5, async (client) => {
        await client.query("SELECT 1");
      });
      await expect(guard.run("bounced-resource", 4, async () => {})).rejects.toBeInstanceOf(StaleFenceError);
      expect(await guard.current("bounced-resource")).toBe(5);
    } finally {
      await pool.end();
    }
  });

  it("without --server-timeouts role, pglease run and status stop in one line that names the fix", async () => {
    const role = new URL(db.url).username;
    const run = await runPglease(
      [
        "run",
        "--lease",
        "bounced-fix",
        "--http-addr",
        "127.0.0.1:0",
        "--no-notify",
        "--no-prepared-statements",
      ],
      { DATABASE_URL: bouncer.url },
    );
    expect(run.code).toBe(1);
    expect(fatalText(run)).toBe(
      "unsupported startup parameter: statement_timeout: PgBouncer in transaction mode refuses server timeouts sent when " +
        "connecting: start with --server-timeouts role (PGLEASE_SERVER_TIMEOUTS=role) and set them on the role, e.g. " +
        `ALTER ROLE "${role}" SET statement_timeout = '2500ms'; ALTER ROLE "${role}" SET lock_timeout = '2500ms' ` +
        "(at most the statement timeout of pglease run, 2500 ms here)",
    );
    const status = await runPglease(["status", "--no-prepared-statements"], { DATABASE_URL: bouncer.url });
    expect(status.code).toBe(1);
    expect(status.stderr).toMatch(
      /^pglease status: unsupported startup parameter: statement_timeout: .*start with --server-timeouts role .*ALTER ROLE "[^"]+" SET lock_timeout = '2500ms' \(at most the statement timeout of pglease run, 2500 ms by default\)\n$/,
    );
  });

  it("pglease run hands over with --no-notify --no-prepared-statements --server-timeouts role, the follower polling", async () => {
    const flags = [
      "--no-notify",
      "--no-prepared-statements",
      "--server-timeouts",
      "role",
      "--duration",
      "3s",
      "--retry-interval",
      "200ms",
    ];
    const env = { DATABASE_URL: bouncer.url };
    const a = startPglease(
      ["run", "--lease", "bounced", "--http-addr", `127.0.0.1:${await freePort()}`, ...flags],
      env,
    );
    const first = await a.waitForLog(/^acquired lease bounced with fence \d+$/);
    // The role's timeouts (500 ms) fit the call timeout of a 3 s lease: nothing to warn about.
    expect(a.output()).not.toMatch(/statement_timeout|lock_timeout/);
    const b = startPglease(
      ["run", "--lease", "bounced", "--http-addr", `127.0.0.1:${await freePort()}`, ...flags],
      env,
    );
    try {
      await b.waitForLog(/^lease bounced is held by/);
      expect((await a.stop("SIGTERM")).code).toBe(0);
      const next = await b.waitForLog(/^acquired lease bounced with fence \d+$/);
      const fence = (line: Record<string, unknown>) => Number(String(line.msg).match(/fence (\d+)$/)?.[1]);
      expect(fence(next)).toBeGreaterThan(fence(first));
    } finally {
      await a.stop("SIGKILL");
      await b.stop("SIGKILL");
    }
  });
});
