// Session takeover, when the process itself gives up the notice session its terms record (issue
// 27, point 1): a follower may take every such term once the server no longer lists the session,
// so nothing of this process may believe in one from the moment the feed drops it. A leader
// steps down at once, a renew still out counts for nothing, a claim still out that recorded the
// session is refused and released, and a stopping leader, still believing while its work winds
// down, steps down too. The feed's session is dropped here by ending it on the server.
import { describe, expect, it } from "vitest";
import { CampaignSwitch } from "../../src/election/campaign-gate.ts";
import { Elector } from "../../src/election/elector.ts";
import { PgReleaseFeed } from "../../src/postgres/release-feed.ts";
import { PgLeaseStore } from "../../src/postgres/store.ts";
import { electorHarness, nextTurn, settle, until } from "../support/election/elector-harness.ts";
import { HoldingStore } from "../support/election/holding-store.ts";
import { ManualClock } from "../support/manual-clock.ts";
import { dropListeners } from "../support/postgres/listen-sessions.ts";

const h = electorHarness();

/** A feed and a store recording its session with every claim, as openLeases({ sessionTakeover }) wires them. */
async function sessionStack(): Promise<{ feed: PgReleaseFeed; held: HoldingStore; dropped: () => boolean }> {
  const feed = new PgReleaseFeed({
    connection: { connectionString: h.db.url },
    table: h.store.table,
    pinnedSession: true,
    // Not back before the test is over: the session is judged without a new one.
    reconnectDelayMs: 60_000,
  });
  await feed.start();
  h.cleanup(() => feed.close());
  let dropped = false;
  feed.subscribeUnhealthy(() => {
    dropped = true;
  });
  const store = new PgLeaseStore({
    pool: h.pool,
    statementTimeoutMs: 30_000,
    holderSession: () => feed.session(),
  });
  return { feed, held: new HoldingStore(store), dropped: () => dropped };
}

async function dropSession(dropped: () => boolean): Promise<void> {
  expect(await dropListeners(h.db.url)).toBe(1);
  await settle(dropped, "the feed drops its session");
}

describe("the notice session given up under session takeover", () => {
  it("ends the leader's term at once, and a renew still out counts for nothing", async () => {
    const clock = new ManualClock();
    const { feed, held, dropped } = await sessionStack();
    const a = h.elector(clock, {
      key: "lost",
      holder: "a",
      store: held,
      releases: feed,
      sessionTakeover: true,
    });
    h.cleanup(() => held.deliverAll());
    a.e.start();
    await until(clock, () => a.e.isLeader(), "leads");
    held.hold("renew");
    clock.advance(a.e.timing.renewIntervalMs);
    await until(clock, () => held.held("renew") === 1, "the renew goes out");
    await held.answered("renew");

    await dropSession(dropped);
    expect(a.e.isLeader()).toBe(false);
    expect(a.terms[0]?.signal.aborted).toBe(true);
    expect(a.transitions.at(-1)).toMatchObject({
      action: "session-lost",
      outcome: "stepped-down",
      sentence: expect.stringMatching(/its notice session, recorded with the term, was dropped/),
    });
    const ticks = a.ticks.length;
    await held.deliver("renew");
    await nextTurn();
    expect(a.ticks).toHaveLength(ticks);
    expect(a.e.isLeader()).toBe(false);
  });

  it("refuses and releases a term won by a claim that was out when its session was given up", async () => {
    const clock = new ManualClock();
    const { feed, held, dropped } = await sessionStack();
    const a = h.elector(clock, {
      key: "claim-out",
      holder: "a",
      store: held,
      releases: feed,
      sessionTakeover: true,
    });
    h.cleanup(() => held.deliverAll());
    held.hold("claim");
    a.e.start();
    await until(clock, () => held.held("claim") === 1, "the claim goes out");
    await held.answered("claim");
    const won = await h.store.read("claim-out");
    expect(won).toMatchObject({ holder: "a" });

    await dropSession(dropped);
    await held.deliver("claim");
    await until(clock, () => a.ticks.length === 1, "the claim's answer is judged");
    expect(a.ticks[0]).toMatchObject({
      outcome: "refused",
      sentence: `won lease claim-out with fence ${won?.fence} on a notice session dropped while the claim was out; releasing it`,
    });
    expect(a.terms).toHaveLength(0);
    await settle(() => held.answers.release === 1, "the refused term is released");
    await nextTurn();
    expect((await h.store.read("claim-out"))?.ttlMs).toBeLessThanOrEqual(0);
  });

  it("ends a stopping leader's term too, while its work winds down", async () => {
    const clock = new ManualClock();
    const { feed, held, dropped } = await sessionStack();
    const a = h.elector(clock, {
      key: "stopping",
      holder: "a",
      store: held,
      releases: feed,
      sessionTakeover: true,
      // Work that ignores its signal: stop() waits for it up to its bound.
      lead: () => new Promise(() => {}),
      stopTimeoutMs: 60_000,
    });
    a.e.start();
    await until(clock, () => a.e.isLeader(), "leads");
    const stopped = a.e.stop();
    await nextTurn();
    expect(a.e.isLeader()).toBe(true);

    await dropSession(dropped);
    expect(a.e.isLeader()).toBe(false);
    expect(a.transitions.at(-1)).toMatchObject({ action: "session-lost", outcome: "stepped-down" });
    clock.advance(60_000);
    await stopped;
  });

  it("still releases a term it was handing over when the session is lost meanwhile", async () => {
    // Before: the loss ended the term, and the hand-over's tick, finding its term over, returned
    // without its release: the successor waited for the old session to end or the lease to expire.
    const clock = new ManualClock();
    const { feed, held, dropped } = await sessionStack();
    const gate = new CampaignSwitch();
    let demoted: (() => void) | undefined;
    const a = h.elector(clock, {
      key: "handing-over",
      holder: "a",
      store: held,
      releases: feed,
      sessionTakeover: true,
      campaign: gate,
      beforeRelease: () => new Promise<void>((resolve) => (demoted = resolve)),
      stopTimeoutMs: 60_000,
    });
    a.e.start();
    await until(clock, () => a.e.isLeader(), "leads");
    gate.unfit("draining");
    await until(clock, () => demoted !== undefined, "the hand-over demotes the pod first");

    await dropSession(dropped);
    expect(a.e.isLeader()).toBe(false);
    expect(a.transitions.at(-1)).toMatchObject({ action: "session-lost", outcome: "stepped-down" });
    demoted?.();
    await settle(() => held.answers.release === 1, "the handed-over term is released");
    await nextTurn();
    expect((await h.store.read("handing-over"))?.ttlMs).toBeLessThanOrEqual(0);
  });

  it("refuses sessionTakeover without a feed that reports the session lost", () => {
    const store = h.store;
    const timing = { leaseDurationMs: 15_000 };
    expect(() => new Elector({ key: "k", holder: "a", store, sessionTakeover: true, ...timing })).toThrow(
      /sessionTakeover needs releases with subscribeSessionLost.*openLeases\(\{ sessionTakeover \}\)/,
    );
    const deaf = { subscribe: () => () => {} };
    expect(
      () => new Elector({ key: "k", holder: "a", store, releases: deaf, sessionTakeover: true, ...timing }),
    ).toThrow(/sessionTakeover needs releases with subscribeSessionLost/);
  });
});
