// What every elector test file needs: its own database with the lease table, a real store on a
// small pool, electors that record their ticks and are stopped after each test, and waits that
// let real I/O finish while the test's clock stands still (or fires only what is due).
import { setTimeout as delay } from "node:timers/promises";
import type pg from "pg";
import { afterAll, afterEach, beforeAll } from "vitest";
import {
  Elector,
  type ElectorOptions,
  type LeaderTerm,
  type TickReport,
} from "../../../src/election/elector.ts";
import { migrate } from "../../../src/postgres/migrate.ts";
import { createLeasePool } from "../../../src/postgres/pool.ts";
import { PgLeaseStore } from "../../../src/postgres/store.ts";
import type { Clock } from "../../../src/shared/clock.ts";
import { createTestDatabase, type TestDatabase } from "../postgres/database.ts";

export type TestClock = Clock & { advance(ms: number): void; pendingTimers(): number };

export const standardTiming = { leaseDurationMs: 15_000, renewIntervalMs: 5_000, retryIntervalMs: 2_000 };

export interface Harness {
  readonly db: TestDatabase;
  readonly pool: pg.Pool;
  readonly store: PgLeaseStore;
  /** Run after the test, last registered first. */
  cleanup(fn: () => Promise<unknown> | unknown): void;
  elector(clock: TestClock, options: Partial<ElectorOptions> & { key: string; holder: string }): Watched;
}

export interface Watched {
  e: Elector;
  ticks: TickReport[];
  transitions: TickReport[];
  /** Every term handed to lead(), when the test gave no lead of its own. */
  terms: LeaderTerm[];
  outcomes(): string[];
}

/** Registers the hooks of one test file and gives access to what they set up. */
export function electorHarness(): Harness {
  let db: TestDatabase | undefined;
  let pool: pg.Pool | undefined;
  let store: PgLeaseStore | undefined;
  const cleanups: Array<() => Promise<unknown> | unknown> = [];
  const need = <T>(value: T | undefined): T => {
    if (value === undefined) throw new Error("the harness is used before its beforeAll ran");
    return value;
  };

  beforeAll(async () => {
    db = await createTestDatabase();
    pool = createLeasePool({ connectionString: db.url, max: 4 });
    store = new PgLeaseStore({ pool, statementTimeoutMs: 30_000 });
    await migrate(pool, store.table);
  });
  afterEach(async () => {
    for (const fn of cleanups.splice(0).reverse()) await fn();
    // A stopped elector does not wait for a call it already gave up on (a held answer): that
    // statement still has its connection until PostgreSQL answers. A leaked one never comes back.
    const inUse = () => need(pool).totalCount - need(pool).idleCount;
    await settle(() => inUse() === 0, `every connection back in the pool (${inUse()} still out)`);
  });
  afterAll(async () => {
    await pool?.end();
    await db?.drop();
  });

  const harness: Harness = {
    get db() {
      return need(db);
    },
    get pool() {
      return need(pool);
    },
    get store() {
      return need(store);
    },
    cleanup: (fn) => cleanups.push(fn),
    elector(clock, options) {
      const terms: LeaderTerm[] = [];
      const e = new Elector({
        store: need(store),
        clock,
        ...standardTiming,
        lead: (term) => terms.push(term),
        ...options,
      });
      const ticks: TickReport[] = [];
      const transitions: TickReport[] = [];
      e.on("tick", (t) => ticks.push(t));
      e.on("transition", (t) => transitions.push(t));
      cleanups.push(() => e.stop());
      return { e, ticks, transitions, terms, outcomes: () => ticks.map((t) => t.outcome) };
    },
  };
  return harness;
}

/** Lets real I/O finish while firing the clock's due timers; fails if it never happens. */
export async function until(clock: TestClock, done: () => boolean, what: string): Promise<void> {
  for (let i = 0; i < 1_000; i++) {
    if (done()) return;
    clock.advance(0);
    await delay(2);
  }
  throw new Error(`never happened: ${what}`);
}

/** Lets real I/O finish without touching the clock: overdue timers stay unfired. */
export async function settle(done: () => boolean, what: string): Promise<void> {
  for (let i = 0; i < 1_000; i++) {
    if (done()) return;
    await delay(2);
  }
  throw new Error(`never happened: ${what}`);
}

/** One turn of the event loop: every promise already settled has run its callbacks. */
export async function nextTurn(): Promise<void> {
  await delay(0);
}
