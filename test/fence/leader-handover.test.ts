// A leader that was paused past its lease wakes up still believing it leads. Its lease store
// answers only when it asks; the guard refuses its writes as soon as the new leader has written.
import { randomBytes } from "node:crypto";
import { beforeAll, expect, it } from "vitest";
import { createFenceGuard, type FenceGuard, StaleFenceError } from "../../src/fence/index.ts";
import { migrate } from "../../src/postgres/migrate.ts";
import { PgLeaseStore } from "../../src/postgres/store.ts";
import { leaseTable } from "../../src/postgres/table.ts";
import { deferred, usePoolFixture } from "./pool-fixture.ts";

const fx = usePoolFixture();
let guard: FenceGuard;

beforeAll(async () => {
  guard = createFenceGuard({ pool: fx.pool });
  await guard.migrate();
  await fx.pool.query(
    "CREATE TABLE orders (id serial PRIMARY KEY, resource text NOT NULL, writer text NOT NULL)",
  );
});

async function writersOf(resource: string): Promise<string[]> {
  const { rows } = await fx.pool.query("SELECT writer FROM orders WHERE resource = $1 ORDER BY id", [
    resource,
  ]);
  return rows.map((r) => r.writer);
}

function write(resource: string, writer: string, fence: number): Promise<void> {
  return guard.run(resource, fence, async (client) => {
    await client.query("INSERT INTO orders (resource, writer) VALUES ($1, $2)", [resource, writer]);
  });
}

it("refuses the old leader (fence 1) once the new leader (fence 2) has written", async () => {
  await write("plain", "old", 1);
  await write("plain", "new", 2);
  const refused = await write("plain", "old", 1).catch((e: unknown) => e);
  expect(refused).toBeInstanceOf(StaleFenceError);
  expect(refused).toMatchObject({ fence: 1, currentFence: 2 });
  expect(await writersOf("plain")).toEqual(["old", "new"]);
});

it("makes the new leader wait for a transaction the old leader began while it still led", async () => {
  const inside = deferred();
  const finish = deferred();
  const oldInFlight = guard.run("in-flight", 1, async (client) => {
    await client.query("INSERT INTO orders (resource, writer) VALUES ('in-flight', 'old')");
    inside.resolve();
    await finish.promise;
  });
  await inside.promise;
  let newCommitted = false;
  const newWrite = write("in-flight", "new", 2).then(() => {
    newCommitted = true;
  });
  // The new leader's advance is blocked on the guard row until the old transaction ends.
  await expect.poll(() => blockedOnGuardRow(), { timeout: 5000 }).toBe(true);
  expect(newCommitted).toBe(false);
  finish.resolve();
  await Promise.all([oldInFlight, newWrite]);
  await expect(write("in-flight", "old", 1)).rejects.toBeInstanceOf(StaleFenceError);
  expect(await writersOf("in-flight")).toEqual(["old", "new"]);
});

it("with the real lease store: the fence a new claim hands out locks out the replaced holder", async () => {
  const table = leaseTable();
  await migrate(fx.pool, table);
  const store = new PgLeaseStore({ pool: fx.pool, statementTimeoutMs: 2000 });
  const key = `orders-sync-${randomBytes(3).toString("hex")}`;

  const a = await store.claim(key, "pod-a-1", 15_000);
  if (!a.won) throw new Error("pod-a should win a fresh lease");
  await write(key, "pod-a", a.fence);

  // pod-a freezes; its lease runs out while it sleeps (moved to now rather than waited for).
  await fx.pool.query(
    `UPDATE ${table.qualified} SET expires_at = acquired_at + interval '1 microsecond' WHERE key = $1`,
    [key],
  );
  const b = await store.claim(key, "pod-b-1", 15_000);
  if (!b.won) throw new Error("pod-b should win the expired lease");
  expect(b.fence).toBeGreaterThan(a.fence);
  await write(key, "pod-b", b.fence);

  // pod-a wakes up still believing it leads, and writes before its next renew would tell it otherwise.
  const refused = await write(key, "pod-a", a.fence).catch((e: unknown) => e);
  expect(refused).toMatchObject({ name: "StaleFenceError", fence: a.fence, currentFence: b.fence });
  expect(await store.renew(key, "pod-a-1", a.fence, 15_000)).toEqual({ renewed: false });
  expect(await writersOf(key)).toEqual(["pod-a", "pod-b"]);
});

async function blockedOnGuardRow(): Promise<boolean> {
  const { rows } = await fx.pool.query(
    `SELECT count(*)::int AS n FROM pg_stat_activity
     WHERE datname = current_database() AND wait_event_type = 'Lock' AND query LIKE '%INSERT INTO "public"."pglease_fences"%'`,
  );
  return rows[0].n === 1;
}
