// Calls on leases that close() has closed, or is closing while they run: each fails saying so and
// what to do instead, never with the pool's own "Cannot use a pool after calling end on the pool",
// whether the pool is the leases' own (ended by close()) or the caller's (left open).
import pg from "pg";
import { afterAll, beforeAll, expect, it } from "vitest";
import { type Leases, type OpenLeasesOptions, openLeases } from "../../src/leases/open-leases.ts";
import { HandoverStore } from "../../src/postgres/handover.ts";
import { createTestDatabase, type TestDatabase } from "../support/postgres/database.ts";

let db: TestDatabase;
beforeAll(async () => {
  db = await createTestDatabase();
});
afterAll(async () => {
  await db.drop();
});

const open = (holder: string, options: OpenLeasesOptions = {}) =>
  openLeases({
    connectionString: db.url,
    holder,
    pod: { name: `${holder}-pod` },
    restartTakeover: false,
    ...options,
  });

it("a handover waiting for its target when close() ends its leases fails saying the leases were closed", async () => {
  // The leader hears no handover request (no LISTEN) and renews only every 20 s: until then the
  // reservation stands and the handover waits for b to lead.
  const a = await open("a", { notify: false });
  const b = await open("b");
  const operator = await open("operator");
  try {
    const ea = a.campaign("k", { leaseDurationMs: 60_000, renewIntervalMs: 20_000 });
    await expect.poll(() => ea.isLeader()).toBe(true);
    b.campaign("k");
    await expect.poll(async () => (await operator.candidates("k")).filter((c) => c.live).length).toBe(2);
    const handover = operator.handover("k", { to: "b", reservationMs: 30_000 }).catch((e: unknown) => e);
    const reservations = new HandoverStore(a.store.pool, a.store.table, 2_500);
    await expect.poll(async () => (await reservations.reservation("k"))?.reservedFor).toBe("b");
    await operator.close();
    const error = await handover;
    expect(error).toBeInstanceOf(Error);
    expect((error as Error).message).toBe(
      "handover of lease k ended: these leases were closed while it ran; the handover may still " +
        "happen (its reservation stands): see the lease with pglease status, and hand over again from leases that are open",
    );
    // Ended by close() itself, before it ended the pool: the pool's own error never surfaces.
    expect(((error as Error).cause as Error).message).toBe("these leases were closed");
  } finally {
    await operator.close();
    await b.close();
    await a.close();
  }
});

it("after close(), handover and candidates fail at once saying the leases are closed, on the leases' own pool or the caller's", async () => {
  const pool = new pg.Pool({ connectionString: db.url, max: 2 });
  try {
    for (const leases of [await open("own"), await open("callers", { pool })] as Leases[]) {
      await leases.close();
      await expect(leases.handover("k")).rejects.toThrow(
        /^cannot hand over lease k: these leases are closed; open them again \(openLeases\) to do it$/,
      );
      await expect(leases.candidates("k")).rejects.toThrow(
        /^cannot list the candidates of lease k: these leases are closed; open them again \(openLeases\) to do it$/,
      );
      expect(() => leases.campaign("k")).toThrow(
        /^cannot campaign for lease k: these leases are closed; open them again \(openLeases\) to do it$/,
      );
    }
    // The caller's pool is still the caller's: close() left it open.
    expect((await pool.query<{ one: number }>("SELECT 1 AS one")).rows).toEqual([{ one: 1 }]);
  } finally {
    await pool.end();
  }
});

it("close() ends a handover waiting for its target on the caller's pool, which close() leaves open", async () => {
  // Nothing ends the caller's pool, so only close() itself can stop the handover looking at the
  // row: a handover left running would query the caller's pool after close() resolved, for up to
  // its reservation (here until a's next renew, 20 s on).
  const pool = new pg.Pool({ connectionString: db.url, max: 2 });
  const a = await open("a", { notify: false });
  const b = await open("b");
  const operator = await open("operator", { pool });
  try {
    const ea = a.campaign("k2", { leaseDurationMs: 60_000, renewIntervalMs: 20_000 });
    await expect.poll(() => ea.isLeader()).toBe(true);
    b.campaign("k2");
    await expect.poll(async () => (await operator.candidates("k2")).filter((c) => c.live).length).toBe(2);
    const handover = operator.handover("k2", { to: "b", reservationMs: 30_000 }).catch((e: unknown) => e);
    const reservations = new HandoverStore(a.store.pool, a.store.table, 2_500);
    await expect.poll(async () => (await reservations.reservation("k2"))?.reservedFor).toBe("b");
    await operator.close();
    // Settled by the time close() resolved: the race takes an already settled promise first.
    const error = await Promise.race([handover, Promise.resolve("still running after close()")]);
    expect(error).toBeInstanceOf(Error);
    expect((error as Error).message).toMatch(
      /^handover of lease k2 ended: these leases were closed while it ran;/,
    );
  } finally {
    await operator.close();
    await b.close();
    await a.close();
    await pool.end();
  }
});
