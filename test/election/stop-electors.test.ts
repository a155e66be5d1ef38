// stopElectors(): many electors stopped at once (close()), their terms released by one statement.
// Each elector must keep every guarantee of its own stop(): its term ends here before any release
// of it can be seen, a call in flight is waited for before its lease is released, and a release
// that fails ends nothing on the server (the term ends at its expiry). Real PostgreSQL answers every
// statement; the races are real statements queued behind an operator's row lock.
import { setTimeout as delay } from "node:timers/promises";
import { describe, expect, it } from "vitest";
import { type Elector, stopElectors } from "../../src/election/elector.ts";
import type { ReleasesMany } from "../../src/election/ports.ts";
import { readHistory } from "../../src/postgres/history-store.ts";
import type { PgLeaseStore } from "../../src/postgres/store.ts";
import { electorHarness, until, type Watched } from "../support/election/elector-harness.ts";
import { HoldingStore } from "../support/election/holding-store.ts";
import { ManualClock } from "../support/manual-clock.ts";
import { lockRow, type RowLock } from "../support/postgres/row-lock.ts";

const h = electorHarness();

/** The real store, recording each releaseMany and calling `onReleaseMany` the moment it is sent. */
class BatchStore extends HoldingStore implements ReleasesMany {
  readonly batches: Array<Array<{ key: string; fence: number }>> = [];
  /** releaseMany statements PostgreSQL has answered (or failed). */
  batchesAnswered = 0;
  onReleaseMany: () => void = () => {};
  readonly #pg: PgLeaseStore;

  constructor(pg: PgLeaseStore) {
    super(pg);
    this.#pg = pg;
  }

  releaseMany(holder: string, terms: ReadonlyArray<{ key: string; fence: number }>) {
    this.batches.push([...terms]);
    this.onReleaseMany();
    const answer = this.#pg.releaseMany(holder, terms);
    const count = () => {
      this.batchesAnswered++;
    };
    answer.then(count, count);
    return answer;
  }
}

function stopping(electors: Elector[], store: BatchStore) {
  const state = { done: false };
  void stopElectors(electors, store).then(() => {
    state.done = true;
  });
  return state;
}

async function leading(clock: ManualClock, store: BatchStore, keys: string[]): Promise<Watched[]> {
  const watched = keys.map((key) => h.elector(clock, { key, holder: "p", store }));
  for (const w of watched) w.e.start();
  await until(clock, () => watched.every((w) => w.e.isLeader()), "every elector leads");
  return watched;
}

const fenceOf = (w: Watched) => w.e.status().fence ?? Number.NaN;

/** A row that exists and is free (expired), so an operator can lock it before anyone claims. */
async function freeRow(key: string): Promise<void> {
  const earlier = await h.store.claim(key, "earlier", 15_000);
  if (!earlier.won) throw new Error(`${key} was already held: ${JSON.stringify(earlier)}`);
  await h.store.forceRelease(key);
}

/** Fires the clock's due timers until a statement waits on the operator's row lock. */
async function queuedBehind(clock: ManualClock, lock: RowLock): Promise<void> {
  for (let i = 0; i < 500; i++) {
    clock.advance(0);
    if ((await lock.waiting()) > 0) return;
    await delay(5);
  }
  throw new Error("never happened: a statement queued behind the row lock");
}

async function releasedEntries(key: string) {
  const history = await readHistory(h.pool, h.store.table, { key, limit: 20 });
  return history.filter((entry) => entry.reason === "release").map((entry) => entry.fence);
}

describe("stopElectors", () => {
  it("each term ends here before the one statement that releases them all is sent", async () => {
    const clock = new ManualClock();
    const store = new BatchStore(h.store);
    const keys = ["together-a", "together-b", "together-c"];
    const watched = await leading(clock, store, keys);
    const fences = watched.map(fenceOf);
    let seen: unknown[] = [];
    store.onReleaseMany = () => {
      seen = watched.map((w) => ({
        leader: w.e.isLeader(),
        role: w.e.status().role,
        workAborted: w.terms.at(-1)?.signal.aborted,
        last: w.transitions.at(-1)?.outcome,
      }));
    };
    const stop = stopping(
      watched.map((w) => w.e),
      store,
    );
    await until(clock, () => stop.done, "every elector stopped");

    expect(store.batches).toEqual([keys.map((key, i) => ({ key, fence: fences[i] }))]);
    expect(seen).toEqual(
      keys.map(() => ({ leader: false, role: "follower", workAborted: true, last: "released" })),
    );
    expect(store.calls.release).toBe(0);
    for (const [i, key] of keys.entries()) {
      expect(await h.store.read(key)).toMatchObject({ holder: "p", fence: fences[i] });
      expect((await h.store.read(key))?.ttlMs).toBeLessThanOrEqual(0);
      expect(await releasedEntries(key)).toEqual([fences[i]]);
    }
    // stop() of one of them answers the same stop, and sends nothing more.
    await watched[0]?.e.stop();
    expect(store.batches).toHaveLength(1);
  });

  it("terms already over on the server are left as they are; the others are released", async () => {
    const clock = new ManualClock();
    const store = new BatchStore(h.store);
    const keys = ["over-live-1", "over-taken", "over-freed", "over-live-2"];
    const watched = await leading(clock, store, keys);
    const fences = watched.map(fenceOf);
    // An operator ends two of the terms; another holder takes one. The electors still believe.
    await h.store.forceRelease("over-taken");
    await h.store.forceRelease("over-freed");
    const intruder = await h.store.claim("over-taken", "intruder", 15_000);
    if (!intruder.won) throw new Error("the intruder's claim failed");
    expect(watched.every((w) => w.e.isLeader())).toBe(true);

    const stop = stopping(
      watched.map((w) => w.e),
      store,
    );
    await until(clock, () => stop.done, "every elector stopped");

    expect(store.batches).toEqual([keys.map((key, i) => ({ key, fence: fences[i] }))]);
    for (const w of watched) {
      expect(w.e.status()).toMatchObject({ role: "follower", fence: null });
      expect(w.transitions.at(-1)?.outcome).toBe("released");
    }
    expect((await h.store.read("over-live-1"))?.ttlMs).toBeLessThanOrEqual(0);
    expect((await h.store.read("over-live-2"))?.ttlMs).toBeLessThanOrEqual(0);
    expect(await releasedEntries("over-live-1")).toEqual([fences[0]]);
    // The intruder's term is untouched; the freed lease gained no second entry.
    const taken = await h.store.read("over-taken");
    expect(taken).toMatchObject({ holder: "intruder", fence: intruder.fence });
    expect(taken?.ttlMs).toBeGreaterThan(0);
    expect(await releasedEntries("over-taken")).toEqual([]);
    expect(await releasedEntries("over-freed")).toEqual([]);
  });

  it("a release statement that fails is reported by each of its electors; their terms end at their expiry", async () => {
    const clock = new ManualClock();
    const store = new BatchStore(h.store);
    const keys = ["fails-a", "fails-b", "fails-c"];
    const watched = await leading(clock, store, keys);
    const fences = watched.map(fenceOf);
    // The statement queues behind an operator's row lock on one of its rows, then is cancelled.
    const lock = await lockRow(h.db.url, h.store.table.qualified, "fails-b");
    h.cleanup(() => lock.rollback());
    const stop = stopping(
      watched.map((w) => w.e),
      store,
    );
    await queuedBehind(clock, lock);
    // Waiting on the server, yet nobody believes any more.
    expect(watched.map((w) => w.e.isLeader())).toEqual([false, false, false]);
    expect(stop.done).toBe(false);
    await lock.cancelWaiters();
    await until(clock, () => stop.done, "every elector stopped");
    await lock.rollback();

    for (const w of watched) {
      expect(w.transitions.at(-1)).toMatchObject({ outcome: "transient-error", action: "release" });
      expect(w.transitions.at(-1)?.sentence).toMatch(/could not release it \(canceling statement/);
      expect(w.e.status()).toMatchObject({ role: "follower", fence: null });
    }
    // One statement: none of its rows was released; each term ends at its expiry.
    for (const [i, key] of keys.entries()) {
      const row = await h.store.read(key);
      expect(row).toMatchObject({ holder: "p", fence: fences[i] });
      expect(row?.ttlMs).toBeGreaterThan(0);
      expect(await releasedEntries(key)).toEqual([]);
    }
  });

  it("an elector whose claim is in flight is waited for, alone: the others' release goes out at once", async () => {
    const clock = new ManualClock();
    const store = new BatchStore(h.store);
    const watched = await leading(clock, store, ["claiming-a", "claiming-b"]);
    await freeRow("claiming-x");
    const lock = await lockRow(h.db.url, h.store.table.qualified, "claiming-x");
    h.cleanup(() => lock.rollback());
    const x = h.elector(clock, { key: "claiming-x", holder: "p", store });
    x.e.start();
    await queuedBehind(clock, lock); // x's claim, queued on the server

    const stop = stopping([...watched.map((w) => w.e), x.e], store);
    await until(clock, () => store.batchesAnswered === 1, "the batch is answered");
    expect(store.batches[0]?.map((t) => t.key)).toEqual(["claiming-a", "claiming-b"]);
    expect((await h.store.read("claiming-a"))?.ttlMs).toBeLessThanOrEqual(0);
    expect(stop.done).toBe(false); // x's claim may still win: its term must be released first

    await lock.commit();
    await until(clock, () => stop.done, "every elector stopped");
    // The claim won while stopping: refused, never led, released by x itself.
    expect(x.outcomes()).toEqual(["refused"]);
    expect(x.terms).toEqual([]);
    expect(store.batches).toHaveLength(1);
    expect(store.calls.release).toBe(1);
    const row = await h.store.read("claiming-x");
    expect(row?.holder).toBe("p");
    expect(row?.ttlMs).toBeLessThanOrEqual(0);
  });

  it("an elector whose renew is in flight releases only once the renew is over", async () => {
    const clock = new ManualClock();
    const store = new BatchStore(h.store);
    const keys = ["renewing-a", "renewing-b", "renewing-r"];
    const watched = await leading(clock, store, keys);
    const r = watched[2] as Watched;
    const rFence = fenceOf(r);
    const lock = await lockRow(h.db.url, h.store.table.qualified, "renewing-r");
    h.cleanup(() => lock.rollback());
    clock.advance(5_000); // the renew interval: all three renew
    await queuedBehind(clock, lock); // r's renew, queued on the server
    await until(clock, () => store.answers.renew === 2, "the others' renewals are answered");

    const stop = stopping(
      watched.map((w) => w.e),
      store,
    );
    await until(clock, () => store.batches.length === 1, "the batch is sent");
    expect(store.batches[0]?.map((t) => t.key)).toEqual(["renewing-a", "renewing-b"]);
    // r still leads: its renew may yet commit, and must not commit after its release.
    expect(r.e.isLeader()).toBe(true);
    expect(stop.done).toBe(false);

    await lock.commit();
    await until(clock, () => stop.done, "every elector stopped");
    expect(r.outcomes().slice(-2)).toEqual(["renewed", "released"]);
    expect(store.batches.map((b) => b.map((t) => t.key))).toEqual([
      ["renewing-a", "renewing-b"],
      ["renewing-r"],
    ]);
    const row = await h.store.read("renewing-r");
    expect(row).toMatchObject({ holder: "p", fence: rFence });
    expect(row?.ttlMs).toBeLessThanOrEqual(0);
    expect(await releasedEntries("renewing-r")).toEqual([rFence]);
  });
});
