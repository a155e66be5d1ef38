import { setTimeout as delay } from "node:timers/promises";
import type pg from "pg";
import { afterAll, beforeAll, expect, it } from "vitest";
import { Elector } from "../../src/election/elector.ts";
import { BatchedRenewals } from "../../src/postgres/batched-renewals.ts";
import { migrate } from "../../src/postgres/migrate.ts";
import { createLeasePool } from "../../src/postgres/pool.ts";
import { PgLeaseStore } from "../../src/postgres/store.ts";
import { ManualClock } from "../support/manual-clock.ts";
import { createTestDatabase, type TestDatabase } from "../support/postgres/database.ts";

/** The real store, counting the statements the batcher sends through it. */
class CountingStore extends PgLeaseStore {
  renewCalls = 0;
  renewManyCalls: number[] = [];
  override renew(key: string, holder: string, fence: number, durationMs: number) {
    this.renewCalls++;
    return super.renew(key, holder, fence, durationMs);
  }
  override renewMany(
    holder: string,
    terms: ReadonlyArray<{ key: string; fence: number }>,
    durationMs: number,
  ) {
    this.renewManyCalls.push(terms.length);
    return super.renewMany(holder, terms, durationMs);
  }
}

let db: TestDatabase;
let pool: pg.Pool;
let store: CountingStore;

beforeAll(async () => {
  db = await createTestDatabase();
  pool = createLeasePool({ connectionString: db.url, max: 1 });
  store = new CountingStore({ pool, statementTimeoutMs: 5_000 });
  await migrate(pool, store.table);
});

afterAll(async () => {
  await pool.end();
  await db.drop();
});

it("renewals asked for in one tick go out as one statement, each with its own answer", async () => {
  const fences = new Map<string, number>();
  for (let i = 0; i < 300; i++) {
    const claim = await store.claim(`batch-${i}`, "p", 10_000);
    if (!claim.won) throw new Error("claim failed");
    fences.set(`batch-${i}`, claim.fence);
  }
  await pool.query(
    "UPDATE pglease_leases SET acquired_at = acquired_at - interval '1 minute', expires_at = clock_timestamp() - interval '1 second' WHERE key = 'batch-7'",
  );
  const batched = new BatchedRenewals(store, { maxBatch: 200 });
  const answers = await Promise.all(
    [...fences].map(([key, fence]) => batched.renew(key, "p", key === "batch-9" ? fence + 1 : fence, 20_000)),
  );
  expect(store.renewManyCalls).toEqual([200, 100]);
  expect(store.renewCalls).toBe(0);
  expect(answers.filter((a) => !a.renewed)).toHaveLength(2);
  expect(answers[7]).toEqual({ renewed: false });
  expect(answers[9]).toEqual({ renewed: false });
  expect(answers[0]).toMatchObject({ renewed: true });
  if (answers[0]?.renewed) expect(answers[0].ttlMs).toBeGreaterThan(19_000);
});

it("a lone renewal takes the single-row statement; another holder's terms go in their own statement", async () => {
  store.renewCalls = 0;
  store.renewManyCalls = [];
  const a = await store.claim("lone", "p", 10_000);
  const b1 = await store.claim("other-1", "q", 10_000);
  const b2 = await store.claim("other-2", "q", 10_000);
  if (!a.won || !b1.won || !b2.won) throw new Error("claim failed");
  const batched = new BatchedRenewals(store);
  const answers = await Promise.all([
    batched.renew("lone", "p", a.fence, 10_000),
    batched.renew("other-1", "q", b1.fence, 10_000),
    batched.renew("other-2", "q", b2.fence, 10_000),
  ]);
  expect(answers.every((x) => x.renewed)).toBe(true);
  expect(store.renewCalls).toBe(1);
  expect(store.renewManyCalls).toEqual([2]);
});

it("electors that acquired at different moments renew together: a statement per tick, not per lease", async () => {
  // Local time is a ManualClock shared by the electors and the batcher; only database round trips
  // take real time. A 30 s lease renews every 10 s, on one grid for the whole process.
  const clock = new ManualClock();
  const batched = new BatchedRenewals(store, { clock });
  const renewals = new Map<string, number>();
  const electors: Elector[] = [];
  const renewedEach = (n: number) => electors.every((e) => renewals.get(e.key) === n);
  try {
    for (let i = 0; i < 50; i++) {
      const e = new Elector({
        key: `grid-${i}`,
        holder: "grid",
        store: batched,
        clock,
        leaseDurationMs: 30_000,
      });
      e.on("tick", (t) => {
        if (t.outcome === "renewed") renewals.set(t.key, (renewals.get(t.key) ?? 0) + 1);
      });
      e.start();
      electors.push(e);
      await until(clock, () => e.isLeader(), `grid-${i} acquires`);
      clock.advance(190); // acquisitions spread over 9.5 s of the 10 s renew interval
    }
    store.renewCalls = 0;
    store.renewManyCalls = [];
    for (const tick of [1, 2]) {
      clock.advance(tick * 10_000 - clock.now()); // the grid instant: every elector asks to renew
      expect(store.renewManyCalls).toHaveLength(tick - 1);
      clock.advance(10); // the batcher's window
      await until(clock, () => renewedEach(tick), `renewal ${tick} of every lease`);
    }
    expect(store.renewCalls).toBe(0);
    expect(store.renewManyCalls).toEqual([50, 50]);
  } finally {
    // The releases wait for the batcher's turn on the manual clock.
    let stopped = false;
    void Promise.all(electors.map((e) => e.stop())).then(() => {
      stopped = true;
    });
    await until(clock, () => stopped, "every elector stopped");
  }
});

it("timers that fire early (Node's count from the loop's cached time) still renew once per interval", async () => {
  // Node starts a timer's countdown from the event loop's cached time, which lags while the loop
  // is busy (10,000 electors' ticks): a renewal timer then fires before its grid instant on the
  // monotonic clock. This clock fires every timer of 10 ms or more 3 ms early, as such a loop does.
  const manual = new ManualClock();
  const early = {
    now: () => manual.now(),
    setTimer: (delayMs: number, fire: () => void) =>
      manual.setTimer(delayMs >= 10 ? delayMs - 3 : delayMs, fire),
  };
  const batched = new BatchedRenewals(store, { clock: manual });
  const electors: Elector[] = [];
  const renewals = new Map<string, number>();
  try {
    for (let i = 0; i < 20; i++) {
      const e = new Elector({
        key: `early-${i}`,
        holder: "early",
        store: batched,
        clock: early,
        leaseDurationMs: 30_000,
      });
      e.on("tick", (t) => {
        if (t.outcome === "renewed") renewals.set(t.key, (renewals.get(t.key) ?? 0) + 1);
      });
      e.start();
      electors.push(e);
      await until(manual, () => e.isLeader(), `early-${i} acquires`);
      manual.advance(300);
    }
    store.renewCalls = 0;
    store.renewManyCalls = [];
    for (const tick of [1, 2]) {
      manual.advance(tick * 10_000 + 20 - manual.now());
      // Every answer applied, not only the statement sent: the next step jumps 10 s, past the
      // call timeout and the first deadline, which a renewal still out on a slow host would not survive.
      await until(
        manual,
        () => electors.every((e) => (renewals.get(e.key) ?? 0) >= tick),
        `renewal ${tick} of every lease`,
      );
      // Whatever a renewal that ran before its instant would have scheduled has had its turn.
      for (let i = 0; i < 20; i++) {
        manual.advance(1);
        await delay(2);
      }
    }
    expect(store.renewCalls).toBe(0);
    expect(store.renewManyCalls).toEqual([20, 20]);
    expect(electors.map((e) => renewals.get(e.key))).toEqual(electors.map(() => 2));
  } finally {
    let stopped = false;
    void Promise.all(electors.map((e) => e.stop())).then(() => {
      stopped = true;
    });
    await until(manual, () => stopped, "every elector stopped");
  }
});

it("releases asked for in one turn go out as one statement, each row checked against its own holder and fence", async () => {
  const released = new Map<string, number>();
  const terms: Array<{ key: string; fence: number }> = [];
  for (let i = 0; i < 120; i++) {
    const claim = await store.claim(`release-${i}`, "r", 10_000);
    if (!claim.won) throw new Error("claim failed");
    terms.push({ key: `release-${i}`, fence: claim.fence });
  }
  const taken = await store.claim("release-taken", "someone-else", 10_000);
  if (!taken.won) throw new Error("claim failed");
  const releaseMany = store.releaseMany.bind(store);
  const batches: number[] = [];
  store.releaseMany = (holder, many) => {
    batches.push(many.length);
    return releaseMany(holder, many);
  };
  try {
    const batched = new BatchedRenewals(store, { maxBatch: 100 });
    const answers = await Promise.all([
      ...terms.map((t, i) => batched.release(t.key, "r", i === 5 ? t.fence + 1 : t.fence)),
      // Another holder's live term, asked for under this holder's name: not released.
      batched.release("release-taken", "r", taken.fence),
    ]);
    expect(batches).toEqual([100, 21]);
    expect(answers.filter((a) => !a)).toHaveLength(2);
    expect(answers[5]).toBe(false);
    expect(answers.at(-1)).toBe(false);
    for (const t of terms) released.set(t.key, (await store.read(t.key))?.ttlMs ?? 0);
    expect(released.get("release-0")).toBeLessThanOrEqual(0);
    expect(released.get("release-5")).toBeGreaterThan(0);
    expect((await store.read("release-taken"))?.ttlMs).toBeGreaterThan(0);
  } finally {
    store.releaseMany = releaseMany;
  }
});

it("two terms of one key in one batch: each answer is its own term's, the old term's renewal and release fail", async () => {
  // The holder's old term and its new one (it claimed the key again) go out in one statement;
  // PostgreSQL answers for the key once, with the live term's fence, which is not the old term's.
  const old = await store.claim("two-terms", "t", 10_000);
  const current = await store.claim("two-terms", "t", 10_000);
  const other = await store.claim("two-terms-other", "t", 10_000);
  if (!old.won || !current.won || !other.won) throw new Error("claim failed");
  expect(current.fence).toBeGreaterThan(old.fence);
  store.renewCalls = 0;
  store.renewManyCalls = [];
  const batched = new BatchedRenewals(store);
  const renewals = await Promise.all([
    batched.renew("two-terms", "t", old.fence, 20_000),
    batched.renew("two-terms", "t", current.fence, 20_000),
    batched.renew("two-terms-other", "t", other.fence, 20_000),
  ]);
  expect(store.renewManyCalls).toEqual([3]);
  expect(renewals.map((a) => a.renewed)).toEqual([false, true, true]);
  const releaseMany = store.releaseMany.bind(store);
  const batches: number[] = [];
  store.releaseMany = (holder, many) => {
    batches.push(many.length);
    return releaseMany(holder, many);
  };
  try {
    // Alone with another key, the old term's release ends nothing: the new term stays live.
    const alone = await Promise.all([
      batched.release("two-terms", "t", old.fence),
      batched.release("two-terms-other", "t", other.fence),
    ]);
    expect(alone).toEqual([false, true]);
    expect((await store.read("two-terms"))?.ttlMs).toBeGreaterThan(0);
    // With the new term in the same statement, the key's answer is the new term's alone.
    const together = await Promise.all([
      batched.release("two-terms", "t", old.fence),
      batched.release("two-terms", "t", current.fence),
    ]);
    expect(batches).toEqual([2, 2]);
    expect(together).toEqual([false, true]);
  } finally {
    store.releaseMany = releaseMany;
  }
});

/** Lets real I/O finish while firing the manual clock's due timers; fails if it never settles. */
async function until(clock: ManualClock, done: () => boolean, what: string): Promise<void> {
  for (let i = 0; i < 2_000; i++) {
    if (done()) return;
    clock.advance(0);
    await delay(2);
  }
  throw new Error(`never happened: ${what}`);
}
