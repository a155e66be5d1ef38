// stop() while a claim or a renew is in flight, for each way the call can end: won (renewed),
// lost, failed, or answered only after its timeout. Real PostgreSQL answers every call; the test
// holds answers (HoldingStore) or queues statements behind an operator's row lock on the server.
import { describe, expect, it } from "vitest";
import type { LeaderTerm } from "../../src/election/elector.ts";
import { createLeasePool } from "../../src/postgres/pool.ts";
import { PgLeaseStore } from "../../src/postgres/store.ts";
import { electorHarness, nextTurn, settle, until } from "../support/election/elector-harness.ts";
import { HoldingStore } from "../support/election/holding-store.ts";
import { ManualClock } from "../support/manual-clock.ts";
import { startFaultProxy } from "../support/postgres/fault-proxy.ts";
import { lockRow } from "../support/postgres/row-lock.ts";

const h = electorHarness();

function stopping(e: { stop(): Promise<void> }) {
  const state = { done: false };
  void e.stop().then(() => {
    state.done = true;
  });
  return state;
}

/**
 * A row that exists and is free (expired), so an operator can lock it before anyone claims.
 * Returns the fence of that earlier term.
 */
async function freeRow(key: string): Promise<number> {
  const earlier = await h.store.claim(key, "earlier", 15_000);
  if (!earlier.won) throw new Error(`${key} was already held: ${JSON.stringify(earlier)}`);
  await h.store.forceRelease(key);
  return earlier.fence;
}

describe("a loss while stopping", () => {
  it("a renew that finds the lease taken while stop() drains the work ends the term at once", async () => {
    const clock = new ManualClock();
    const held = new HoldingStore(h.store);
    const terms: LeaderTerm[] = [];
    let finishWork = () => {};
    const a = h.elector(clock, {
      key: "stop-loss",
      holder: "a",
      store: held,
      stopTimeoutMs: 60_000,
      // Ignores its signal until the test lets it finish.
      lead: (t) => {
        terms.push(t);
        return new Promise<void>((resolve) => {
          finishWork = resolve;
        });
      },
    });
    h.cleanup(() => held.deliverAll());
    a.e.start();
    await until(clock, () => a.ticks.length === 1, "acquire");
    await h.store.forceRelease("stop-loss");
    const intruder = await h.store.claim("stop-loss", "intruder", 15_000);
    expect(intruder.won).toBe(true);
    expect(intruder.fence).toBeGreaterThan(terms[0]?.fence ?? Number.NaN);
    held.hold("renew");
    clock.advance(5_000);
    await until(clock, () => held.held("renew") === 1, "the renew goes out");
    const stop = stopping(a.e);
    expect(a.e.isLeader()).toBe(true);
    await held.deliver("renew"); // zero rows: the intruder holds it
    await settle(() => a.e.status().role === "follower", "the loss applies while stopping");

    expect(a.transitions.at(-1)).toMatchObject({ outcome: "lost", action: "renew" });
    expect(a.e.status()).toMatchObject({ role: "follower", fence: null, lastOutcome: "lost" });
    expect(terms[0]?.signal.aborted).toBe(true);
    expect(stop.done).toBe(false); // still waiting for the work, bounded
    finishWork();
    await until(clock, () => stop.done, "stop finishes once the work returns");
    expect(a.outcomes()).toEqual(["acquired", "lost"]);
    expect(held.calls.release).toBe(0); // nothing of its own left to release
    expect((await h.store.read("stop-loss"))?.holder).toBe("intruder");
  });
});

describe("a graceful stop", () => {
  // Simulation seeds 803 and 270: the release commits and notifies; a follower that hears the
  // notice claims and leads while the stopping process still said leader until the answer came.
  it("ends the term locally before the release is sent: a follower may lead as soon as it commits", async () => {
    const clock = new ManualClock();
    const held = new HoldingStore(h.store);
    const a = h.elector(clock, { key: "stop-ends-first", holder: "a", store: held });
    h.cleanup(() => held.deliverAll());
    a.e.start();
    await until(clock, () => a.ticks.length === 1, "acquire");
    const fence = a.e.status().fence;
    held.hold("release");
    const stop = stopping(a.e);
    await until(clock, () => held.held("release") === 1, "the release goes out");
    await held.answered("release"); // committed on the server, the answer not yet back
    const b = await h.store.claim("stop-ends-first", "b", 15_000);
    expect(b.won).toBe(true);

    expect(a.e.isLeader()).toBe(false);
    expect(a.e.status()).toMatchObject({ role: "follower", fence: null, lastOutcome: "released" });
    expect(a.terms[0]?.signal.aborted).toBe(true);
    expect(a.transitions.at(-1)).toMatchObject({
      outcome: "released",
      action: "release",
      sentence: `released lease stop-ends-first (fence ${fence})`,
      state: { role: "follower", term: null },
    });
    // The release call's own timeout is all that is left: the deadline timer is gone.
    expect(clock.pendingTimers()).toBe(1);

    await held.deliver("release");
    await until(clock, () => stop.done, "stop");
    expect(a.outcomes()).toEqual(["acquired", "released"]);
    expect(clock.pendingTimers()).toBe(0);
  });
});

describe("stop while a renew is in flight", () => {
  async function leading(key: string) {
    const clock = new ManualClock();
    const held = new HoldingStore(h.store);
    const a = h.elector(clock, { key, holder: "a", store: held });
    h.cleanup(() => held.deliverAll());
    a.e.start();
    await until(clock, () => a.ticks.length === 1, "acquire");
    return { clock, held, a };
  }

  it("renewed: the renew is reported, then the term is released", async () => {
    const { clock, held, a } = await leading("stop-renewed");
    held.hold("renew");
    clock.advance(5_000);
    await until(clock, () => held.held("renew") === 1, "the renew goes out");
    const stop = stopping(a.e);
    await held.deliver("renew");
    await until(clock, () => stop.done, "stop");
    expect(a.outcomes()).toEqual(["acquired", "renewed", "released"]);
    expect((await h.store.read("stop-renewed"))?.ttlMs).toBeLessThanOrEqual(0);
  });

  it("failed: the term stands until the release", async () => {
    const { clock, held, a } = await leading("stop-renew-error");
    const lock = await lockRow(h.db.url, h.store.table.qualified, "stop-renew-error");
    h.cleanup(() => lock.commit());
    clock.advance(5_000);
    await settle(() => held.calls.renew === 1, "the renew goes out");
    await settleWaiting(lock, 1);
    const stop = stopping(a.e);
    await lock.cancelWaiters(); // PostgreSQL's own error: canceling statement due to user request
    await settle(() => a.ticks.length === 2, "the renew fails");
    // The failure ends nothing: the term goes on until stop() ends it, right before the release.
    expect(a.ticks[1]).toMatchObject({
      action: "renew",
      outcome: "transient-error",
      state: { role: "leader" },
    });
    await lock.commit();
    await nextTurn();
    expect(held.calls.release).toBe(0); // a failed write may still commit: stop waits it out
    clock.advance(a.e.timing.callTimeoutMs + 1_000);
    await until(clock, () => stop.done, "stop");
    expect(a.outcomes()).toEqual(["acquired", "transient-error", "released"]);
    expect((await h.store.read("stop-renew-error"))?.ttlMs).toBeLessThanOrEqual(0);
  });

  it("answered after its timeout: stop waits for it before releasing, so it cannot revive the term", async () => {
    const { clock, held, a } = await leading("stop-renew-late");
    held.hold("renew");
    clock.advance(5_000);
    await until(clock, () => held.held("renew") === 1, "the renew goes out");
    const stop = stopping(a.e);
    clock.advance(a.e.timing.callTimeoutMs);
    await until(clock, () => a.ticks.length === 2, "the renew times out");
    expect(a.ticks[1]?.outcome).toBe("transient-error");
    expect(held.calls.release).toBe(0);
    await held.deliver("renew");
    await until(clock, () => stop.done, "stop");
    expect(a.outcomes()).toEqual(["acquired", "transient-error", "released"]);
    expect((await h.store.read("stop-renew-late"))?.ttlMs).toBeLessThanOrEqual(0);
  });
});

describe("stop while a claim is in flight", () => {
  it("won: nothing starts, nothing is announced, and the term is released", async () => {
    const clock = new ManualClock();
    const held = new HoldingStore(h.store);
    held.hold("claim");
    const a = h.elector(clock, { key: "stop-claim-won", holder: "a", store: held });
    h.cleanup(() => held.deliverAll());
    a.e.start();
    await until(clock, () => held.held("claim") === 1, "the claim goes out");
    const stop = stopping(a.e);
    await held.deliver("claim");
    await until(clock, () => stop.done, "stop");
    // Released in place: the row keeps the holder and the fence the claim won.
    const row = await h.store.read("stop-claim-won");
    expect(row).toMatchObject({ holder: "a" });
    expect(a.outcomes()).toEqual(["refused"]);
    expect(a.ticks[0]?.sentence).toBe(
      `won lease stop-claim-won with fence ${row?.fence} while stopping; releasing it`,
    );
    expect(a.terms).toEqual([]);
    expect(a.transitions.some((t) => t.state.role === "leader")).toBe(false);
    expect(row?.ttlMs).toBeLessThanOrEqual(0);
  });

  it("lost: stop ends without touching the other holder's term", async () => {
    const clock = new ManualClock();
    const held = new HoldingStore(h.store);
    const other = await h.store.claim("stop-claim-lost", "other", 15_000);
    expect(other.won).toBe(true);
    held.hold("claim");
    const a = h.elector(clock, { key: "stop-claim-lost", holder: "a", store: held });
    h.cleanup(() => held.deliverAll());
    a.e.start();
    await until(clock, () => held.held("claim") === 1, "the claim goes out");
    const stop = stopping(a.e);
    await held.deliver("claim");
    await until(clock, () => stop.done, "stop");
    expect(a.outcomes()).toEqual(["held-by-other"]);
    expect(held.calls.release).toBe(0);
    expect(await h.store.read("stop-claim-lost")).toMatchObject({ holder: "other", fence: other.fence });
  });

  it("failed: stop waits it out (a failure may come from the link alone), looks, and releases nothing that is not its own", async () => {
    const clock = new ManualClock();
    const held = new HoldingStore(h.store);
    await freeRow("stop-claim-error");
    const lock = await lockRow(h.db.url, h.store.table.qualified, "stop-claim-error");
    h.cleanup(() => lock.commit());
    const a = h.elector(clock, { key: "stop-claim-error", holder: "a", store: held });
    a.e.start();
    await until(clock, () => held.calls.claim === 1, "the claim goes out");
    await settleWaiting(lock, 1);
    const stop = stopping(a.e);
    await lock.cancelWaiters(); // PostgreSQL's own error: canceling statement due to user request
    await settle(() => a.ticks.length === 1, "the claim fails");
    await nextTurn();
    expect(held.calls.read).toBe(0);
    clock.advance(a.e.timing.callTimeoutMs + 1_000);
    await until(clock, () => stop.done, "stop");
    expect(a.outcomes()).toEqual(["transient-error"]);
    expect(a.ticks[0]?.sentence).toMatch(/^could not claim lease stop-claim-error \(canceling statement/);
    expect(held.calls.read).toBe(1);
    expect(held.calls.release).toBe(0);
    expect(await h.store.read("stop-claim-error")).toMatchObject({ holder: "earlier" });
  });

  it("timed out while queued on the server: stop waits for it, then releases the term it won", async () => {
    const clock = new ManualClock();
    const held = new HoldingStore(h.store);
    const earlier = await freeRow("stop-claim-queued");
    const lock = await lockRow(h.db.url, h.store.table.qualified, "stop-claim-queued");
    h.cleanup(() => lock.commit());
    const a = h.elector(clock, { key: "stop-claim-queued", holder: "a", store: held });
    a.e.start();
    await until(clock, () => held.calls.claim === 1, "the claim goes out");
    await settleWaiting(lock, 1);
    clock.advance(a.e.timing.callTimeoutMs);
    await until(clock, () => a.ticks.length === 1, "the claim times out");
    expect(a.ticks[0]?.outcome).toBe("transient-error");
    const stop = stopping(a.e);
    await nextTurn();
    expect(held.calls.read).toBe(0); // it waits: the claim may still commit
    await lock.commit(); // the claim commits now, long after its call gave up
    await until(clock, () => stop.done, "stop");
    expect(a.outcomes()).toEqual(["transient-error", "refused"]);
    const row = await h.store.read("stop-claim-queued");
    expect(row).toMatchObject({ holder: "a" });
    expect(row?.fence).toBeGreaterThan(earlier);
    expect(a.ticks[1]?.sentence).toBe(
      `lease stop-claim-queued (fence ${row?.fence}) was held in this holder's name by a write whose answer never counted; releasing it`,
    );
    expect(a.terms).toEqual([]);
    expect(row?.ttlMs).toBeLessThanOrEqual(0);
  });

  // Simulation seeds 30460 and 77703: the connection broke after the claim left, the claim
  // committed on the server after the process had exited.
  it("failed on a broken connection while queued on the server: stop waits for it as for a timed-out one", async () => {
    const clock = new ManualClock();
    const url = new URL(h.db.url);
    const proxy = await startFaultProxy({ host: url.hostname, port: Number(url.port) });
    h.cleanup(() => proxy.close());
    const cutPool = createLeasePool({ connectionString: proxy.url(h.db.url), max: 2 });
    h.cleanup(() => cutPool.end());
    await cutPool.query("SELECT 1"); // connected before the claim, so it is on the server at once
    const held = new HoldingStore(new PgLeaseStore({ pool: cutPool, statementTimeoutMs: 60_000 }));
    const earlier = await freeRow("stop-claim-cut");
    const lock = await lockRow(h.db.url, h.store.table.qualified, "stop-claim-cut");
    h.cleanup(() => lock.commit());
    const a = h.elector(clock, { key: "stop-claim-cut", holder: "a", store: held });
    a.e.start();
    await until(clock, () => held.calls.claim === 1, "the claim goes out");
    await settleWaiting(lock, 1);
    proxy.cut(); // the client fails at once; the backend waits on, not reading its socket
    await settle(() => a.ticks.length === 1, "the claim fails");
    expect(a.ticks[0]?.outcome).toBe("transient-error");
    proxy.heal();
    const stop = stopping(a.e);
    await nextTurn();
    expect(held.calls.read).toBe(0); // it waits: the claim may still commit
    await lock.commit(); // the claim commits now, its client long gone
    await committedFor("stop-claim-cut", "a");
    clock.advance(a.e.timing.callTimeoutMs + 1_000);
    await until(clock, () => stop.done, "stop, after looking at the row");
    const row = await h.store.read("stop-claim-cut");
    expect(row).toMatchObject({ holder: "a" });
    expect(row?.fence).toBeGreaterThan(earlier);
    expect(a.outcomes()).toEqual(["transient-error", "refused"]);
    expect(a.terms).toEqual([]);
    expect(row?.ttlMs).toBeLessThanOrEqual(0);
  });

  it("timed out and never settling: stop waits until the call timeout plus a second after it was sent, no longer", async () => {
    const clock = new ManualClock();
    const held = new HoldingStore(h.store);
    await freeRow("stop-claim-stuck");
    const lock = await lockRow(h.db.url, h.store.table.qualified, "stop-claim-stuck");
    h.cleanup(() => lock.commit());
    const a = h.elector(clock, { key: "stop-claim-stuck", holder: "a", store: held });
    a.e.start();
    await until(clock, () => held.calls.claim === 1, "the claim goes out");
    await settleWaiting(lock, 1);
    clock.advance(a.e.timing.callTimeoutMs);
    await until(clock, () => a.ticks.length === 1, "the claim times out");
    const stop = stopping(a.e);
    await nextTurn();
    clock.advance(999); // the claim was sent at 0
    await nextTurn();
    expect(held.calls.read).toBe(0);
    clock.advance(1);
    await until(clock, () => stop.done, "stop, after looking at the row");
    expect(held.calls.read).toBe(1);
    await lock.cancelWaiters();
  });
});

async function settleWaiting(lock: { waiting(): Promise<number> }, n: number): Promise<void> {
  for (let i = 0; i < 500; i++) {
    if ((await lock.waiting()) >= n) return;
  }
  throw new Error(`never happened: ${n} statement(s) waiting for the row lock`);
}

async function committedFor(key: string, holder: string): Promise<void> {
  for (let i = 0; i < 500; i++) {
    if ((await h.store.read(key))?.holder === holder) return;
  }
  throw new Error(`never happened: a commit of ${key} for ${holder}`);
}
