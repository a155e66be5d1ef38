// Lease statements time out on the server too. A client-side timeout only drops the promise: the
// server would keep the statement queued on the row lock, one more backend per retry, and commit it
// whenever the lock came free, long after its caller gave up.
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { migrate } from "../../src/postgres/migrate.ts";
import { createLeasePool } from "../../src/postgres/pool.ts";
import { checkServer } from "../../src/postgres/server-checks.ts";
import { PgLeaseStore } from "../../src/postgres/store.ts";
import { createTestDatabase, type TestDatabase } from "../support/postgres/database.ts";
import { type Bouncer, PGBOUNCER, startPgBouncer } from "../support/postgres/pgbouncer.ts";
import { lockRow, lockWaiters } from "../support/postgres/row-lock.ts";

const TIMEOUT_MS = 300;
let db: TestDatabase;
let probe: pg.Pool;

beforeAll(async () => {
  db = await createTestDatabase();
  probe = new pg.Pool({ connectionString: db.url, max: 1 });
  await migrate(probe, new PgLeaseStore({ pool: probe, statementTimeoutMs: 1 }).table);
});

afterAll(async () => {
  await probe.end();
  await db.drop();
});

/** A lease row whose term ended: any claim wins it, unless something holds its lock. */
async function expiredRow(key: string): Promise<void> {
  await probe.query(
    `INSERT INTO pglease_leases VALUES ($1, 'old', 1, clock_timestamp() - interval '2 seconds',
                                       clock_timestamp() - interval '1 second')`,
    [key],
  );
}

/**
 * Retries a claim stuck behind a row lock, then lets the lock go; answers the row as it ends up.
 * `who` names the claims' backends (application name, or the role behind PgBouncer).
 */
async function claimsBehindLock(store: PgLeaseStore, who: string, key: string) {
  await expiredRow(key);
  const locker = await lockRow(db.url, store.table.qualified, key);
  try {
    for (let attempt = 0; attempt < 3; attempt++) {
      await expect(store.claim(key, "late", 10_000)).rejects.toThrow();
    }
    // The server cancels each one at its own timeout: none is left waiting.
    await expect.poll(() => lockWaiters(probe, who), { timeout: 5 * TIMEOUT_MS }).toBe(0);
  } finally {
    await locker.commit();
  }
  const { rows } = await probe.query("SELECT holder FROM pglease_leases WHERE key = $1", [key]);
  return rows[0];
}

describe("with statementTimeoutMs on the lease pool", () => {
  it("a claim stuck behind a row lock is cancelled by the server, and never commits later", async () => {
    const application = "pglease-timeouts";
    const pool = createLeasePool({
      connectionString: db.url,
      max: 4,
      applicationName: application,
      statementTimeoutMs: TIMEOUT_MS,
    });
    try {
      const store = new PgLeaseStore({ pool, statementTimeoutMs: TIMEOUT_MS });
      expect(await claimsBehindLock(store, application, "stuck")).toEqual({ holder: "old" });
      expect((await checkServer(pool, TIMEOUT_MS)).facts).toMatchObject({
        statementTimeoutMs: TIMEOUT_MS,
        lockTimeoutMs: TIMEOUT_MS,
      });
    } finally {
      await pool.end();
    }
  });

  it("refuses a timeout that is not a positive whole number of milliseconds", () => {
    expect(() => createLeasePool({ statementTimeoutMs: 0 })).toThrow(/statementTimeoutMs must be a positive/);
    expect(() => createLeasePool({ statementTimeoutMs: 1.5 })).toThrow(
      /statementTimeoutMs must be a positive/,
    );
  });
});

describe.skipIf(!PGBOUNCER)("behind PgBouncer in transaction mode", () => {
  let bouncer: Bouncer;
  const role = "pglease_bounced_timeouts";

  beforeAll(async () => {
    await probe.query(
      `DO $$ BEGIN CREATE ROLE ${role} LOGIN PASSWORD 'pw'; EXCEPTION WHEN duplicate_object THEN NULL; END $$`,
    );
    await probe.query(`GRANT SELECT, INSERT, UPDATE ON pglease_leases TO ${role}`);
    await probe.query(`GRANT USAGE ON SEQUENCE pglease_leases_fence TO ${role}`);
    await probe.query(`ALTER ROLE ${role} IN DATABASE ${db.name} SET statement_timeout = '${TIMEOUT_MS}ms'`);
    await probe.query(`ALTER ROLE ${role} IN DATABASE ${db.name} SET lock_timeout = '${TIMEOUT_MS}ms'`);
    const url = new URL(db.url);
    url.username = role;
    url.password = "pw";
    bouncer = await startPgBouncer(url.toString(), 2);
  });

  afterAll(async () => {
    await bouncer?.stop();
  });

  it("startup parameters are refused there, so the timeouts come from the role", async () => {
    const startup = createLeasePool({
      connectionString: bouncer.url,
      max: 1,
      statementTimeoutMs: TIMEOUT_MS,
    });
    try {
      await expect(startup.query("SELECT 1")).rejects.toThrow(/unsupported startup parameter/);
    } finally {
      await startup.end();
    }
    const pool = createLeasePool({
      connectionString: bouncer.url,
      max: 4,
      statementTimeoutMs: TIMEOUT_MS,
      serverTimeouts: "role",
    });
    try {
      const store = new PgLeaseStore({ pool, statementTimeoutMs: TIMEOUT_MS, preparedStatements: false });
      expect((await checkServer(pool, TIMEOUT_MS)).warnings).toEqual([]);
      // PgBouncer does not pass the application name on; the role names the backends.
      expect(await claimsBehindLock(store, role, "bounced-stuck")).toEqual({ holder: "old" });
    } finally {
      await pool.end();
    }
  });
});
