// A statement that waited in the lease pool for longer than its deadline is not sent: its caller
// (the elector's call timeout is the same bound) gave up on it already. It used to go out once a
// connection came free: a claim nobody waited for won a term that was then released as a stray,
// and with thousands of electors starting at once on a busy host that churn never ended.
import pg from "pg";
import { afterAll, beforeAll, expect, it } from "vitest";
import { migrate } from "../../src/postgres/migrate.ts";
import { createLeasePool } from "../../src/postgres/pool.ts";
import { PgLeaseStore, StatementNotSent } from "../../src/postgres/store.ts";
import { createTestDatabase, type TestDatabase } from "../support/postgres/database.ts";
import { waitForLockWaiters } from "../support/postgres/row-lock.ts";

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

// The window bounds only the wait for a connection. A claim that is sent has its whole deadline
// on the server: here 10 s, as a test on a loaded host needs (a 200 ms deadline on the claims
// that must win failed with "Query read timeout" whenever the server took longer to answer).
it("drops a claim that waited for a connection past its window, sends one that did not however slow the server, and sends a release however late", async () => {
  const pool = createLeasePool({ connectionString: db.url, max: 1 });
  try {
    const store = new PgLeaseStore({ pool, statementTimeoutMs: 10_000 });
    // A deadline shorter than 500 ms is the window itself.
    const impatient = new PgLeaseStore({ pool, statementTimeoutMs: 200 });
    await migrate(pool, store.table);
    // The pool's one connection busy for longer than either window (another user of a shared pool).
    const busy = pool.query("SELECT pg_sleep(1)");
    const late = store.claim("queued", "h", 10_000);
    const lateImpatient = impatient.claim("queued", "h", 10_000);
    await expect(late).rejects.toThrow(StatementNotSent);
    await expect(late).rejects.toThrow(
      /claim waited \d+ ms for a connection of the lease pool, past its 500 ms: not sent/,
    );
    await expect(lateImpatient).rejects.toThrow(/past its 200 ms: not sent/);
    await busy;
    const { rows } = await admin.query("SELECT key FROM pglease_leases");
    expect(rows).toEqual([]);
    // A free pool sends at once, and the claim then waits for the server past the window: here the
    // table is locked for 700 ms (a loaded or stalled server) and the claim still wins.
    const locker = new pg.Client({ connectionString: db.url });
    await locker.connect();
    await locker.query("BEGIN");
    await locker.query("LOCK TABLE pglease_leases IN EXCLUSIVE MODE");
    const claim = store.claim("queued", "h", 10_000);
    await waitForLockWaiters(admin, "pglease");
    await locker.query("SELECT pg_sleep(0.7)");
    await locker.query("COMMIT");
    await locker.end();
    const won = await claim;
    expect(won.won).toBe(true);
    // A release is sent however long it waited: scoped to its term, it can only end that term.
    const busyAgain = pool.query("SELECT pg_sleep(1)");
    if (won.won) expect(await store.release("queued", "h", won.fence)).toBe(true);
    await busyAgain;
    expect(pool.totalCount - pool.idleCount).toBe(0);
  } finally {
    await pool.end();
  }
});
