// The checker must be able to fail: each rule fed a hand-made history that breaks it, and the
// same history without the break, which must pass.
import { describe, expect, it } from "vitest";
import { checkHistory } from "./checker.ts";
import type { History, Incarnation, LabelChange, Transition } from "./history.ts";

const LEASE = "chaos";

/** Two replicas; a (pid 1) leads with fence 1 from 1000 to 5000, b (pid 2) with fence 2 from 7000. */
function cleanHistory(): History {
  const incarnations: Incarnation[] = [
    { replica: "a", pid: 1, holder: "a-1", startedAt: 0, endedAt: null },
    { replica: "b", pid: 2, holder: "b-1", startedAt: 0, endedAt: null },
  ];
  const transitions: Transition[] = [
    { pid: 1, time: 1_000, outcome: "acquired", fence: 1 },
    { pid: 2, time: 1_010, outcome: "held-by-other", fence: 1 },
    { pid: 1, time: 5_000, outcome: "stepped-down", fence: 1 },
    { pid: 2, time: 7_000, outcome: "acquired", fence: 2 },
  ];
  let rv = 100;
  const label = (time: number, pod: string, role: string | null): LabelChange => ({
    resourceVersion: rv++,
    time,
    pod,
    role,
  });
  return {
    lease: LEASE,
    leaseMs: 2_000,
    window: { from: 0, to: 20_000 },
    pods: { a: "pod-a", b: "pod-b" },
    incarnations,
    transitions,
    pauses: [],
    leaseRows: [
      { seq: 1, key: LEASE, holder: "a-1", fence: 1, acquiredAt: 1_000 },
      { seq: 2, key: LEASE, holder: "a-1", fence: 1, acquiredAt: 1_000 },
      { seq: 3, key: LEASE, holder: "b-1", fence: 2, acquiredAt: 7_000 },
    ],
    writes: [
      { seq: 1, replica: "a", fence: 1, issuedAt: 1_100 },
      { seq: 2, replica: "a", fence: 1, issuedAt: 1_200 },
      { seq: 5, replica: "b", fence: 2, issuedAt: 7_100 },
    ],
    rejections: [{ replica: "a", fence: 1, currentFence: 2, time: 7_200 }],
    labels: [
      label(500, "pod-a", "follower"),
      label(500, "pod-b", "follower"),
      label(1_020, "pod-a", "leader"),
      label(5_010, "pod-a", "follower"),
      label(7_020, "pod-b", "leader"),
    ],
    slots: [
      // The leader's link cut at 3000: it steps down at 5000, b leads (and is labelled) at 7020.
      { index: 0, kind: "db-cut", startedAt: 3_000, healedAt: 6_500, faults: [] },
    ],
  };
}

const rules = (history: History) => checkHistory(history).violations.map((v) => v.rule);

describe("chaos checker", () => {
  it("passes a clean history and measures its failover and recovery", () => {
    const result = checkHistory(cleanHistory());
    expect(result.violations).toEqual([]);
    expect(result.slots).toEqual([{ index: 0, kind: "db-cut", failoverMs: 7_020 - 5_000, recoveryMs: 520 }]);
    expect(result.writesAccepted).toBe(3);
    expect(result.writesRejected).toBe(1);
  });

  it("reports a write accepted with a fence lower than one already accepted", () => {
    const history = cleanHistory();
    history.writes.push(
      { seq: 6, replica: "a", fence: 1, issuedAt: 7_300 },
      { seq: 7, replica: "a", fence: 1, issuedAt: 7_301 },
    );
    const result = checkHistory(history);
    expect(result.violations).toEqual([
      {
        rule: "stale-write",
        at: 7_300,
        detail: "2 write(s) by a with fence 1 accepted after fence 2, issued over 1 ms",
      },
    ]);
  });

  it("judges writes in commit order (seq), not in the order they were issued", () => {
    const history = cleanHistory();
    // Issued early, committed last: the stale one is the late commit.
    history.writes.push({ seq: 9, replica: "a", fence: 1, issuedAt: 1_300 });
    expect(rules(history)).toEqual(["stale-write"]);
  });

  it("reports a new term that does not raise the fence, in the lease table", () => {
    const history = cleanHistory();
    history.leaseRows[2] = { seq: 3, key: LEASE, holder: "b-1", fence: 1, acquiredAt: 7_000 };
    expect(rules(history)).toContain("fence-order");
  });

  it("reports a fence that changes inside one term", () => {
    const history = cleanHistory();
    history.leaseRows[1] = { seq: 2, key: LEASE, holder: "a-1", fence: 3, acquiredAt: 1_000 };
    expect(rules(history)).toContain("fence-order");
  });

  it("reports acquisitions logged out of fence order, and a fence the table never granted", () => {
    const history = cleanHistory();
    history.transitions[3] = { pid: 2, time: 7_000, outcome: "acquired", fence: 1 };
    expect(rules(history)).toEqual(expect.arrayContaining(["fence-order", "fence-not-granted"]));
  });

  it("allows the same holder to take its own live term back with the same fence", () => {
    const history = cleanHistory();
    history.transitions.push({ pid: 2, time: 9_000, outcome: "stepped-down", fence: 2 });
    history.transitions.push({ pid: 2, time: 9_500, outcome: "acquired", fence: 2 });
    history.labels.push({ resourceVersion: 900, time: 9_010, pod: "pod-b", role: "follower" });
    history.labels.push({ resourceVersion: 901, time: 9_510, pod: "pod-b", role: "leader" });
    expect(rules(history)).toEqual([]);
  });

  it("reports two running processes believing they lead at once", () => {
    const history = cleanHistory();
    // a steps down 3 ms after b acquired: beyond the 2 ms of timestamp rounding.
    history.transitions[2] = { pid: 1, time: 7_003, outcome: "stepped-down", fence: 1 };
    history.labels[3] = { resourceVersion: 103, time: 7_004, pod: "pod-a", role: "follower" };
    history.labels[4] = { resourceVersion: 104, time: 7_020, pod: "pod-b", role: "leader" };
    const result = checkHistory(history);
    expect(result.violations.map((v) => v.rule)).toEqual(["two-believers"]);
    expect(result.violations[0]?.detail).toMatch(/both believed they led for 3 ms/);
  });

  it("takes 2 ms of overlap as timestamp rounding", () => {
    const history = cleanHistory();
    history.transitions[2] = { pid: 1, time: 7_002, outcome: "stepped-down", fence: 1 };
    history.labels[3] = { resourceVersion: 103, time: 7_003, pod: "pod-a", role: "follower" };
    expect(rules(history)).toEqual([]);
  });

  it("does not count a paused process's belief, but does count it once the wake-up grace is over", () => {
    const history = cleanHistory();
    // a SIGSTOPped from 4000 to 7500 while believing; it steps down 20 ms after waking.
    history.transitions[2] = { pid: 1, time: 7_520, outcome: "stepped-down", fence: 1 };
    history.labels[3] = { resourceVersion: 103, time: 7_010, pod: "pod-a", role: "follower" };
    history.pauses.push({ pid: 1, kind: "sigstop", from: 4_000, to: 7_500 });
    const result = checkHistory(history);
    expect(result.violations).toEqual([]);
    expect(result.staleWakeups).toEqual({
      sigstop: { count: 1, maxMs: 20 },
      "loop-block": { count: 0, maxMs: 0 },
    });

    // 210 ms after waking: 10 ms past the 200 ms grace.
    history.transitions[2] = { pid: 1, time: 7_710, outcome: "stepped-down", fence: 1 };
    expect(rules(history)).toEqual(["two-believers"]);
  });

  it("ends a killed process's belief at its death", () => {
    const history = cleanHistory();
    history.transitions.splice(2, 1);
    history.incarnations[0] = { ...(history.incarnations[0] as Incarnation), endedAt: 4_000 };
    // The new leader demotes the dead one's pod before labelling itself.
    history.labels[3] = { resourceVersion: 103, time: 7_015, pod: "pod-a", role: "follower" };
    expect(rules(history)).toEqual([]);
    history.incarnations[0] = { ...(history.incarnations[0] as Incarnation), endedAt: null };
    expect(rules(history)).toContain("two-believers");
  });

  it("reports two pods labelled leader in the same API server state", () => {
    const history = cleanHistory();
    // b labels itself before a's label is removed.
    history.labels[3] = { resourceVersion: 104, time: 7_030, pod: "pod-a", role: "follower" };
    history.labels[4] = { resourceVersion: 103, time: 7_020, pod: "pod-b", role: "leader" };
    const result = checkHistory(history);
    expect(result.violations.map((v) => v.rule)).toEqual(["two-labelled"]);
    expect(result.violations[0]?.detail).toBe(
      "pods pod-a, pod-b carried the leader label together for 10 ms",
    );
  });

  it("reports a heal not followed by a labelled leader within lease + 1 s", () => {
    const history = cleanHistory();
    history.slots[0] = { index: 0, kind: "db-cut", startedAt: 3_000, healedAt: 5_500, faults: [] };
    // b's label arrives 3.52 s after the heal: over the 3 s bound.
    history.labels[4] = { resourceVersion: 104, time: 9_020, pod: "pod-b", role: "leader" };
    const result = checkHistory(history);
    expect(result.violations.map((v) => v.rule)).toEqual(["liveness"]);
    expect(result.slots[0]?.recoveryMs).toBe(3_520);
  });

  it("does not count a leader whose pod is not labelled, nor a labelled pod whose process does not believe", () => {
    const history = cleanHistory();
    history.labels.splice(4, 1);
    expect(rules(history)).toEqual(["liveness"]);
  });
});
