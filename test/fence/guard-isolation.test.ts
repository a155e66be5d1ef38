// The guard under a session whose default isolation is stricter than READ COMMITTED (a common
// setting for applications that want serializable transactions): writers queued on one guard row
// still compare with the committed fence ahead of them instead of failing with a serialization error.
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createFenceGuard, StaleFenceError } from "../../src/fence/index.ts";
import { createTestDatabase, type TestDatabase } from "../support/postgres/database.ts";
import { waitForLockWaiters } from "../support/postgres/row-lock.ts";
import { deferred, endPool, expectNoClientCheckedOut } from "./pool-fixture.ts";

let db: TestDatabase;

beforeAll(async () => {
  db = await createTestDatabase();
  const pool = new pg.Pool({ connectionString: db.url, max: 1 });
  try {
    await createFenceGuard({ pool }).migrate();
  } finally {
    await endPool(pool);
  }
});

afterAll(async () => {
  await db.drop();
});

describe.each(["repeatable read", "serializable"])("with default_transaction_isolation = %s", (level) => {
  it("a queued higher fence advances after the writer ahead commits, and a lower one is refused as stale", async () => {
    const pool = new pg.Pool({
      connectionString: db.url,
      max: 4,
      options: `-c default_transaction_isolation=${level.replace(" ", "\\ ")}`,
      application_name: "pglease-guard-isolation",
    });
    const probe = new pg.Pool({ connectionString: db.url, max: 1 });
    const resource = `orders-${level.replace(" ", "-")}`;
    try {
      const { rows } = await pool.query("SHOW default_transaction_isolation");
      expect(rows[0].default_transaction_isolation).toBe(level);
      const guard = createFenceGuard({ pool });
      await guard.run(resource, 1, async () => {});
      // Each writer queues on the row lock of the one ahead while that one's transaction is open, so
      // its first statement (and, under a stricter isolation, its snapshot) predates that commit.
      const firstInside = deferred();
      const firstFinish = deferred();
      const first = guard.run(resource, 2, async (client) => {
        firstInside.resolve();
        await firstFinish.promise;
        return (await client.query("SHOW transaction_isolation")).rows[0].transaction_isolation;
      });
      await firstInside.promise;
      const higherInside = deferred();
      const higherFinish = deferred();
      const higher = guard.run(resource, 3, async () => {
        higherInside.resolve();
        await higherFinish.promise;
        return "advanced";
      });
      await waitForLockWaiters(probe, "pglease-guard-isolation", 1);
      firstFinish.resolve();
      expect(await first).toBe("read committed");
      await higherInside.promise;
      const stale = guard.run(resource, 2, async () => "stale").catch((e: unknown) => e);
      await waitForLockWaiters(probe, "pglease-guard-isolation", 1);
      higherFinish.resolve();
      expect(await higher).toBe("advanced");
      expect(await stale).toBeInstanceOf(StaleFenceError);
      expect(await stale).toMatchObject({ fence: 2, currentFence: 3 });
      expect(await guard.current(resource)).toBe(3);
      expectNoClientCheckedOut(pool);
    } finally {
      await endPool(pool);
      await probe.end();
    }
  });
});
