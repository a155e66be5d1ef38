// One database and pool per test file, and the leak check every fence test ends with: no client
// checked out, nobody waiting for one.
import pg from "pg";
import { afterAll, afterEach, beforeAll, expect } from "vitest";
import { createTestDatabase, type TestDatabase } from "../support/postgres/database.ts";

export interface PoolFixture {
  db: TestDatabase;
  pool: pg.Pool;
}

export function usePoolFixture(max = 10): PoolFixture {
  const fixture = {} as PoolFixture;
  beforeAll(async () => {
    fixture.db = await createTestDatabase();
    fixture.pool = new pg.Pool({ connectionString: fixture.db.url, max });
  });
  afterEach(() => {
    expectNoClientCheckedOut(fixture.pool);
  });
  afterAll(async () => {
    if (fixture.pool) await endPool(fixture.pool);
    await fixture.db?.drop();
  });
  return fixture;
}

/**
 * pool.end() resolves before its clients' sockets close; dropping the database then would kill
 * those backends and surface as uncaught errors on clients nobody listens to any more.
 */
export async function endPool(pool: pg.Pool): Promise<void> {
  let open = pool.totalCount;
  const allClosed = new Promise<void>((resolve) => {
    if (open === 0) resolve();
    pool.on("remove", () => {
      if (--open === 0) resolve();
    });
  });
  await pool.end();
  await allClosed;
}

export function expectNoClientCheckedOut(pool: pg.Pool): void {
  expect({ checkedOut: pool.totalCount - pool.idleCount, waiting: pool.waitingCount }).toEqual({
    checkedOut: 0,
    waiting: 0,
  });
}

/** A promise with its resolve handle, to hold a transaction open until the test says so. */
export function deferred<T = void>(): { promise: Promise<T>; resolve: (value: T) => void } {
  let resolve!: (value: T) => void;
  const promise = new Promise<T>((r) => {
    resolve = r;
  });
  return { promise, resolve };
}
