// The README's library example, run as written against a real PostgreSQL.
import { setTimeout as sleep } from "node:timers/promises";
import pg from "pg";
import { afterAll, beforeAll, expect, it } from "vitest";
import { openLeases } from "../../src/index.ts";
import { createTestDatabase, type TestDatabase } from "../support/postgres/database.ts";

let db: TestDatabase;
beforeAll(async () => {
  db = await createTestDatabase();
});
afterAll(async () => {
  await db.drop();
});

it("runs leader-only work with the fence until the signal aborts, and hands over on close", async () => {
  const written: Array<{ holder: string; fence: number }> = [];
  const leaderLoop =
    (holder: string) =>
    async ({ fence, signal }: { fence: number; signal: AbortSignal }) => {
      while (!signal.aborted) {
        written.push({ holder, fence });
        await sleep(20, undefined, { signal }).catch(() => {});
      }
    };

  const first = await openLeases({ connectionString: db.url, holder: "first" });
  const second = await openLeases({ connectionString: db.url, holder: "second" });
  try {
    const a = first.campaign("orders-sync", { lead: leaderLoop("first") });
    await expect.poll(() => a.isLeader()).toBe(true);
    const b = second.campaign("orders-sync", { lead: leaderLoop("second") });
    await expect.poll(() => b.status().leader).toBe(first.holder);
    await expect.poll(() => written.length).toBeGreaterThan(2);

    await first.close();
    const handedOverAt = written.length;
    await expect.poll(() => b.isLeader()).toBe(true);
    await expect.poll(() => written.length).toBeGreaterThan(handedOverAt + 2);
    // The first leader's loop ended with its signal; only the second writes now, with a higher fence.
    const after = written.slice(handedOverAt);
    expect(new Set(after.map((w) => w.holder))).toEqual(new Set(["second"]));
    expect(Math.min(...after.map((w) => w.fence))).toBeGreaterThan(
      Math.max(...written.filter((w) => w.holder === "first").map((w) => w.fence)),
    );
  } finally {
    await first.close();
    await second.close();
  }
});

it("listens on the pool it is given, and refuses a campaign whose calls end before its statements", async () => {
  const pool = new pg.Pool({ connectionString: db.url, max: 2 });
  const leases = await openLeases({ pool, holder: "pooled" });
  try {
    const e = leases.campaign("pooled-lease");
    await expect.poll(() => e.isLeader()).toBe(true);
    expect(() => leases.campaign("too-fast", { leaseDurationMs: 3_000 })).toThrow(
      /callTimeoutMs \(500 ms\) of lease too-fast is shorter than the statement timeout \(2500 ms\)/,
    );
  } finally {
    await leases.close();
    await pool.end();
  }
});
