// Leader work must not starve the lease. Two long fenced transactions on a pool of two, shared
// with the leases (the README's pattern once), made a healthy leader step down: its renew waited
// for a pool connection past its deadline. With the leases on their own pool (the README's
// pattern now, and openLeases' default) the same work leaves leadership alone.
import { setTimeout as sleep } from "node:timers/promises";
import pg from "pg";
import { afterAll, beforeAll, expect, it } from "vitest";
import { createFenceGuard, type Elector, openLeases } from "../../src/index.ts";
import { createTestDatabase, type TestDatabase } from "../support/postgres/database.ts";

let db: TestDatabase;
beforeAll(async () => {
  db = await createTestDatabase();
});
afterAll(async () => {
  await db.drop();
});

const timing = { leaseDurationMs: 3_000, callTimeoutMs: 500 };

/** Leads, then runs two 2.5 s fenced transactions at once on `appPool`; answers whether it stepped down. */
async function stepsDownUnderWork(appPool: pg.Pool, leasesPool: pg.Pool | undefined): Promise<boolean> {
  const guard = createFenceGuard({ pool: appPool });
  await guard.migrate();
  const leases = await openLeases({
    ...(leasesPool ? { pool: leasesPool } : { connectionString: db.url }),
    statementTimeoutMs: 500,
    notify: false,
    logger: { info: () => {}, warn: () => {} },
  });
  let elector: Elector | undefined;
  try {
    const outcomes: string[] = [];
    elector = leases.campaign(`starved-${leasesPool ? "shared" : "own"}`, timing);
    elector.on("transition", (t) => outcomes.push(t.outcome));
    await expect.poll(() => elector?.isLeader()).toBe(true);
    const fence = elector.status().fence ?? 0;
    const work = (n: number) =>
      guard.run(`resource-${n}`, fence, async (client) => {
        await client.query("SELECT pg_sleep(2.5)");
      });
    await Promise.all([work(1), work(2)]);
    await sleep(200);
    return outcomes.includes("stepped-down");
  } finally {
    await leases.close();
  }
}

it("a pool shared with the leader's work starves the lease; the leases' own pool does not", async () => {
  const shared = new pg.Pool({ connectionString: db.url, max: 2 });
  try {
    expect(await stepsDownUnderWork(shared, shared)).toBe(true);
  } finally {
    await shared.end();
  }
  const app = new pg.Pool({ connectionString: db.url, max: 2 });
  try {
    expect(await stepsDownUnderWork(app, undefined)).toBe(false);
  } finally {
    await app.end();
  }
});
