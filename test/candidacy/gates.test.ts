// The candidacy's gates on their own: several reasons not to lead asked as one (gates.ts), and
// "higher priority leads first when the lease is free" (priority-gate.ts), on the elector's ticks
// as the elector reports them (its state's role and the holder it observed) and a fake timer for
// the one retry interval the gate waits.
import { EventEmitter } from "node:events";
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { allGates } from "../../src/candidacy/gates.ts";
import { PriorityGate } from "../../src/candidacy/priority-gate.ts";
import { CampaignSwitch } from "../../src/election/campaign-gate.ts";
import type { Elector, TickReport } from "../../src/election/elector.ts";

describe("allGates", () => {
  it("is open while every gate is, and says the first closed gate's reason, in the order given", () => {
    const own = new CampaignSwitch();
    const handover = new CampaignSwitch();
    const gate = allGates([own, handover]);
    expect(gate.reasonNotToLead()).toBeNull();
    handover.unfit("handover to b");
    expect(gate.reasonNotToLead()).toBe("handover to b");
    own.unfit("unhealthy");
    expect(gate.reasonNotToLead()).toBe("unhealthy");
    own.fit();
    handover.fit();
    expect(gate.reasonNotToLead()).toBeNull();
  });

  it("tells its subscriber of a change in any gate, and no more once unsubscribed from all of them", () => {
    const a = new CampaignSwitch();
    const b = new CampaignSwitch();
    const changed = vi.fn();
    const unsubscribe = allGates([a, b]).subscribe(changed);
    a.unfit("x");
    b.unfit("y");
    expect(changed).toHaveBeenCalledTimes(2);
    unsubscribe();
    a.fit();
    b.fit();
    expect(changed).toHaveBeenCalledTimes(2);
  });
});

/** The part of an elector the priority gate reads: its ticks and whether it leads. */
class TickingElector extends EventEmitter {
  leader = false;
  isLeader(): boolean {
    return this.leader;
  }
  /** A tick as the elector reports it: its role, and (a follower's) the holder it observed. */
  tick(role: "leader" | "follower", holder: string | null): void {
    const observed = role === "follower" ? { holder, fence: holder === null ? null : 1 } : null;
    this.emit("tick", { key: "k", state: { role, term: null, observed } } as unknown as TickReport);
  }
}

describe("PriorityGate", () => {
  const RETRY_MS = 2_000;
  let elector: TickingElector;
  let gate: PriorityGate;
  let changes: number;
  beforeEach(() => {
    vi.useFakeTimers();
    elector = new TickingElector();
    gate = new PriorityGate(1, RETRY_MS);
    gate.attach(elector as unknown as Elector);
    changes = 0;
    gate.subscribe(() => changes++);
  });
  afterEach(() => {
    gate.close();
    vi.useRealTimers();
  });

  const WAITING = "waiting one retry interval for a live candidate of priority 5 (this one: 1)";

  it("is open without a live candidate of higher priority: an equal or lower one does not hold it back", () => {
    gate.othersBest(null);
    expect(gate.reasonNotToLead()).toBeNull();
    gate.othersBest(1);
    expect(gate.reasonNotToLead()).toBeNull();
    gate.othersBest(0);
    expect(gate.reasonNotToLead()).toBeNull();
    expect(changes).toBe(0);
  });

  it("closes for a higher live candidate, says for which, and tells the elector once per change", () => {
    gate.othersBest(5);
    expect(gate.reasonNotToLead()).toBe(WAITING);
    gate.othersBest(5);
    expect(changes).toBe(1);
    gate.othersBest(null);
    expect(gate.reasonNotToLead()).toBeNull();
    expect(changes).toBe(2);
  });

  it("opens once the lease has been seen free for one retry interval, and not a millisecond sooner", () => {
    gate.othersBest(5);
    elector.tick("follower", null);
    vi.advanceTimersByTime(RETRY_MS - 1);
    // Seen free again meanwhile: the wait does not start over.
    elector.tick("follower", null);
    expect(gate.reasonNotToLead()).toBe(WAITING);
    vi.advanceTimersByTime(1);
    expect(gate.reasonNotToLead()).toBeNull();
    expect(changes).toBe(2);
  });

  it("waits again the next time the lease is free once someone led meanwhile", () => {
    gate.othersBest(5);
    elector.tick("follower", null);
    vi.advanceTimersByTime(RETRY_MS);
    expect(gate.reasonNotToLead()).toBeNull();
    elector.tick("follower", "high");
    expect(gate.reasonNotToLead()).toBe(WAITING);
    elector.tick("follower", null);
    vi.advanceTimersByTime(RETRY_MS - 1);
    expect(gate.reasonNotToLead()).toBe(WAITING);
    vi.advanceTimersByTime(1);
    expect(gate.reasonNotToLead()).toBeNull();
  });

  it("someone leading during the wait ends it: the gate does not open behind their back", () => {
    gate.othersBest(5);
    elector.tick("follower", null);
    vi.advanceTimersByTime(RETRY_MS / 2);
    elector.tick("follower", null);
    elector.tick("follower", "high");
    vi.advanceTimersByTime(10 * RETRY_MS);
    expect(gate.reasonNotToLead()).toBe(WAITING);
    expect(changes).toBe(1);
  });

  it("a lease someone holds starts no wait: the gate stays closed while the higher candidate lives", () => {
    gate.othersBest(5);
    elector.tick("follower", "someone");
    vi.advanceTimersByTime(10 * RETRY_MS);
    expect(gate.reasonNotToLead()).toBe(WAITING);
  });

  it("a free lease seen before any higher candidate was known starts no wait: the next free tick does", () => {
    elector.tick("follower", null);
    gate.othersBest(5);
    vi.advanceTimersByTime(10 * RETRY_MS);
    expect(gate.reasonNotToLead()).toBe(WAITING);
    elector.tick("follower", null);
    vi.advanceTimersByTime(RETRY_MS);
    expect(gate.reasonNotToLead()).toBeNull();
  });

  it("never holds back a leader: a live leader is not preempted by priority alone", () => {
    gate.othersBest(5);
    elector.leader = true;
    elector.tick("leader", null);
    expect(gate.reasonNotToLead()).toBeNull();
    // A leader's ticks start no wait either.
    elector.leader = false;
    vi.advanceTimersByTime(10 * RETRY_MS);
    expect(gate.reasonNotToLead()).toBe(WAITING);
  });

  it("close() stops the wait: the gate does not open, nor call anyone, afterwards", () => {
    gate.othersBest(5);
    elector.tick("follower", null);
    gate.close();
    vi.advanceTimersByTime(10 * RETRY_MS);
    expect(gate.reasonNotToLead()).toBe(WAITING);
    expect(changes).toBe(1);
  });
});
