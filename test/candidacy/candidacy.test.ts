// The candidacy's decisions (src/candidacy/candidacy.ts), on a real PostgreSQL with real electors
// on an injected clock: what join() refuses and which reason its gate gives first, when a
// handover notice closes the leader's gate (only a live reservation of its own term for someone
// else), when a follower asks by priority (--preempt), and whom a stopping leader's releases reserve for.
import { describe, expect, it } from "vitest";
import { Candidacy, NO_LEAD } from "../../src/candidacy/candidacy.ts";
import { CampaignSwitch } from "../../src/election/campaign-gate.ts";
import { stopElectors } from "../../src/election/elector.ts";
import { CandidateStore } from "../../src/postgres/candidates.ts";
import { HandoverStore } from "../../src/postgres/handover.ts";
import { PgLeaseStore, releaseToSuccessors } from "../../src/postgres/store.ts";
import {
  electorHarness,
  settle,
  standardTiming,
  until,
  type Watched,
} from "../support/election/elector-harness.ts";
import { ManualClock } from "../support/manual-clock.ts";

const h = electorHarness();
const TIMEOUT_MS = 5_000;

interface Process {
  candidacy: Candidacy;
  /** Delivers a handover notice for `key`, as the release feed's second channel does. */
  notify(key: string): void;
  logs: string[];
  campaign(
    key: string,
    clock: ManualClock,
    options?: { priority?: number; preempt?: boolean; noLead?: boolean },
    store?: PgLeaseStore,
  ): Watched;
}

function processOf(holder: string, revision: string | null = null): Process {
  const listeners = new Set<(key: string) => void>();
  const logs: string[] = [];
  const candidacy = new Candidacy({
    candidates: new CandidateStore(h.pool, h.store.table, TIMEOUT_MS),
    handovers: new HandoverStore(h.pool, h.store.table, TIMEOUT_MS),
    holder,
    pod: `${holder}-pod`,
    revision,
    subscribeHandovers: (listener) => {
      listeners.add(listener);
      return () => listeners.delete(listener);
    },
    statementTimeoutMs: TIMEOUT_MS,
    warn: (message) => logs.push(`warn: ${message}`),
    info: (message) => logs.push(`info: ${message}`),
  });
  h.cleanup(() => candidacy.close());
  return {
    candidacy,
    logs,
    notify: (key) => {
      for (const listener of listeners) listener(key);
    },
    campaign: (key, clock, options = {}, store) => {
      const gate = candidacy.join(key, standardTiming, options);
      const w = h.elector(clock, { key, holder, campaign: gate, ...(store ? { store } : {}) });
      candidacy.attach(key, w.e);
      w.e.start();
      return w;
    },
  };
}

const handovers = () => new HandoverStore(h.pool, h.store.table, TIMEOUT_MS);

/** Resolves once no statement is out on the pool: a notice's read (sent at once) has answered. */
async function readsAnswered(): Promise<void> {
  const out = () => h.pool.totalCount - h.pool.idleCount + h.pool.waitingCount;
  await settle(() => out() === 0, "every read answered");
}

/** Resolves once the leader's release has committed: the belief ends before the statement does. */
async function released(key: string): Promise<void> {
  await expect.poll(async () => (await handovers().reservation(key))?.live).toBe(false);
}
const candidates = () => new CandidateStore(h.pool, h.store.table, TIMEOUT_MS);

/**
 * Resolves once `holders` are the live candidates of `key`: each announces after its elector's
 * first tick, which the test's clock fires (only what is due: no time passes).
 */
async function announced(clock: ManualClock, key: string, holders: string[]): Promise<void> {
  await expect
    .poll(async () => {
      clock.advance(0);
      return (await candidates().list(key))
        .filter((c) => c.live)
        .map((c) => c.holder)
        .sort();
    })
    .toEqual([...holders].sort());
}

describe("join", () => {
  it("refuses a priority that is not a whole number, and preempt with noLead, naming the lease", () => {
    const p = processOf("j");
    expect(() => p.candidacy.join("k", standardTiming, { priority: 1.5 })).toThrow(
      new RangeError("priority of lease k must be a whole number, got 1.5"),
    );
    expect(() => p.candidacy.join("k", standardTiming, { priority: Number.NaN })).toThrow(RangeError);
    expect(() => p.candidacy.join("k", standardTiming, { preempt: true, noLead: true })).toThrow(
      /^lease k: preempt and noLead contradict each other/,
    );
  });

  it("no-lead mode is the reason given first, before the application's own; without it, the application's", () => {
    const p = processOf("n");
    const own = new CampaignSwitch("unhealthy");
    expect(p.candidacy.join("k1", standardTiming, { noLead: true }, own).reasonNotToLead()).toBe(NO_LEAD);
    const gate = p.candidacy.join("k2", standardTiming, {}, own);
    expect(gate.reasonNotToLead()).toBe("unhealthy");
    own.fit();
    expect(gate.reasonNotToLead()).toBeNull();
  });
});

describe("a handover notice", () => {
  it("closes the leader's gate for a live reservation of its own term, and opens it once the target leads", async () => {
    const clock = new ManualClock();
    const a = processOf("a");
    const b = processOf("b");
    const ea = a.campaign("hand", clock);
    await until(clock, () => ea.e.isLeader(), "a leads");
    const eb = b.campaign("hand", clock);
    await announced(clock, "hand", ["a", "b"]);
    const fence = ea.e.status().fence ?? Number.NaN;
    expect(await handovers().reserve("hand", fence, "b", 60_000)).toMatchObject({ reservedFor: "b" });
    a.notify("hand");
    await until(clock, () => !ea.e.isLeader(), "a hands over");
    expect(ea.e.status().notCampaigning).toBe("handover to b");
    await released("hand");
    clock.advance(standardTiming.retryIntervalMs);
    await until(clock, () => eb.e.isLeader(), "b claims the reserved lease");
    // a's next read sees b lead: it campaigns again at once, not at the reservation's (60 s) end.
    clock.advance(standardTiming.retryIntervalMs);
    await until(clock, () => ea.e.status().notCampaigning === null, "a campaigns again");
    expect(ea.e.isLeader()).toBe(false);
  });

  it("is only a hint: without a reservation, or for a lease another process leads, nothing closes", async () => {
    const clock = new ManualClock();
    const a = processOf("a2");
    const b = processOf("b2");
    const ea = a.campaign("hint", clock);
    await until(clock, () => ea.e.isLeader(), "a leads");
    const eb = b.campaign("hint", clock);
    await announced(clock, "hint", ["a2", "b2"]);
    // No reservation on the row: the leader keeps leading.
    a.notify("hint");
    await readsAnswered();
    expect(ea.e.status().notCampaigning).toBeNull();
    // A reservation for someone else of a's term: b, a follower, is not the one asked.
    await handovers().reserve("hint", ea.e.status().fence ?? Number.NaN, "c2", 60_000);
    b.notify("hint");
    await readsAnswered();
    expect(ea.e.isLeader()).toBe(true);
    expect(ea.e.status().notCampaigning).toBeNull();
    expect(eb.e.status().notCampaigning).toBeNull();
  });
});

describe("a stopping leader's successors", () => {
  it("each lease it leads is reserved for its best live candidate that leads, by its release; a lease without one for nobody", async () => {
    const clock = new ManualClock();
    // The stopping leader's own store: the successor reservation is asked of a store, not of h.store.
    const stopping = new PgLeaseStore({ pool: h.pool, statementTimeoutMs: TIMEOUT_MS });
    const a = processOf("a4");
    const low = processOf("low4", "r1");
    const fresh = processOf("fresh4", "r2");
    const never = processOf("never4", "r2");
    const e1 = a.campaign("s1", clock, {}, stopping);
    const e2 = a.campaign("s2", clock, {}, stopping);
    const e3 = a.campaign("s3", clock, {}, stopping);
    await until(clock, () => e1.e.isLeader() && e2.e.isLeader() && e3.e.isLeader(), "a leads all three");
    low.campaign("s1", clock, { priority: 1 });
    low.campaign("s3", clock);
    await announced(clock, "s1", ["a4", "low4"]);
    await announced(clock, "s3", ["a4", "low4"]);
    // Started later, of the newest revision: first at one priority (s3), but priority comes first
    // (s1); a no-lead candidate is never a target, whatever its priority.
    fresh.campaign("s1", clock);
    fresh.campaign("s3", clock);
    never.campaign("s1", clock, { priority: 9, noLead: true });
    await announced(clock, "s1", ["a4", "low4", "fresh4", "never4"]);
    await announced(clock, "s3", ["a4", "low4", "fresh4"]);
    const refused: string[] = [];
    releaseToSuccessors(stopping, { reservationMs: 60_000, onRefused: (e) => refused.push(e.message) });
    // s1 alone (its single release), then s2 and s3 together (one releaseMany).
    const done = { one: false, both: false };
    void e1.e.stop().then(() => {
      done.one = true;
    });
    await until(clock, () => done.one, "s1 released");
    void stopElectors([e2.e, e3.e], stopping).then(() => {
      done.both = true;
    });
    await until(clock, () => done.both, "s2 and s3 released");
    expect(await handovers().reservation("s1")).toMatchObject({
      holder: "a4",
      live: false,
      reservedFor: "low4",
    });
    expect(await handovers().reservation("s3")).toMatchObject({
      holder: "a4",
      live: false,
      reservedFor: "fresh4",
    });
    expect(await handovers().reservation("s2")).toMatchObject({
      holder: "a4",
      live: false,
      reservedFor: null,
    });
    expect((await handovers().reservation("s1"))?.reservedForMs).toBeGreaterThan(50_000);
    expect(refused).toEqual([]);
  });
});

describe("preempt", () => {
  it("a follower of higher priority asks a live leader of lower priority to hand over to it; an equal one does not", async () => {
    const clock = new ManualClock();
    const a = processOf("a5");
    const equal = processOf("equal5");
    const higher = processOf("higher5");
    const ea = a.campaign("pre", clock, { priority: 2 });
    await until(clock, () => ea.e.isLeader(), "a leads");
    await announced(clock, "pre", ["a5"]);
    equal.campaign("pre", clock, { priority: 2, preempt: true });
    await announced(clock, "pre", ["a5", "equal5"]);
    expect((await handovers().reservation("pre"))?.reservedFor).toBeNull();
    expect(equal.logs).toEqual([]);
    const eh = higher.campaign("pre", clock, { priority: 3, preempt: true });
    await expect
      .poll(async () => {
        clock.advance(0);
        return (await handovers().reservation("pre"))?.reservedFor;
      })
      .toBe("higher5");
    expect(higher.logs).toEqual([
      "info: asked a5 (priority 2) to hand lease pre over to this process (priority 3, --preempt)",
    ]);
    // The leader hears the request and hands over; the asker claims.
    a.notify("pre");
    await until(clock, () => !ea.e.isLeader(), "a hands over");
    await released("pre");
    clock.advance(standardTiming.retryIntervalMs);
    await until(clock, () => eh.e.isLeader(), "the higher one leads");
  });

  it("never asks a leader that is no candidate (its priority unknown)", async () => {
    const clock = new ManualClock();
    const bare = h.elector(clock, { key: "bare", holder: "bare6" });
    bare.e.start();
    await until(clock, () => bare.e.isLeader(), "a non-candidate leads");
    const higher = processOf("higher6");
    higher.campaign("bare", clock, { priority: 9, preempt: true });
    await announced(clock, "bare", ["higher6"]);
    expect((await handovers().reservation("bare"))?.reservedFor).toBeNull();
    expect(higher.logs).toEqual([]);
  });
});

describe("close", () => {
  it("removes this process's rows, for every key it joined", async () => {
    const clock = new ManualClock();
    const a = processOf("a7");
    a.campaign("c1", clock);
    a.campaign("c2", clock);
    await announced(clock, "c1", ["a7"]);
    await announced(clock, "c2", ["a7"]);
    await a.candidacy.close();
    expect((await candidates().list()).filter((c) => c.holder === "a7")).toEqual([]);
  });
});
