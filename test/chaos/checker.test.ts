// The checker must be able to fail: every rule is fed a hand-made history that breaks it, and
// the same history without the break (checker-fixture.ts) must pass.
import { describe, expect, it } from "vitest";
import { checkHistory } from "./checker.ts";
import { cleanHistory, END, inCommitOrder, LEASE, label, row, WINDOW_TO, write } from "./checker-fixture.ts";
import type { History, Incarnation, LabelChange } from "./history.ts";
import { termOverlaps } from "./lease-rules.ts";
import { believedIntervals } from "./timeline.ts";
import { QUIET_BOUND_MS } from "./workload-timing.ts";
import { staleWrites, writesNotGranted } from "./write-rules.ts";

const rules = (history: History) => checkHistory(history).violations.map((v) => v.rule);

describe("chaos checker: the clean history", () => {
  it("passes, and measures its failover, recovery and longest write gap", () => {
    const result = checkHistory(cleanHistory());
    expect(result.violations).toEqual([]);
    expect(result.slots).toEqual([{ index: 0, kind: "db-cut", failoverMs: 7_020 - 5_000, recoveryMs: 520 }]);
    // a: 1100…2900, b: 7100…12 000 inside the fault phase (b's last write, 12 100, is in shutdown).
    expect(result.writesAccepted).toBe(19 + 50);
    expect(result.writesRejected).toBe(1);
    // From b's acquisition at 7000 to its first write at 7100.
    expect(result.longestWriteGapMs).toBe(100);
  });
});

describe("chaos checker: writes", () => {
  it("stale-write: a fence lower than one already accepted", () => {
    const history = cleanHistory();
    history.writes.push(write("a", 1, 12_300), write("a", 1, 12_301));
    expect(checkHistory(history).violations).toEqual([
      {
        rule: "stale-write",
        at: 12_300,
        detail: "2 write(s) by a with fence 1 accepted after fence 2, issued over 1 ms",
      },
    ]);
  });

  it("stale-write: judged in commit order (seq), not in the order the writes were issued", () => {
    const history = cleanHistory();
    // Issued early, committed last: the stale one is the late commit.
    history.writes.push(write("a", 1, 1_300));
    expect(rules(history)).toEqual(["stale-write"]);
  });

  it("stale-write: the same fence from another replica, after that replica's writes", () => {
    const history = cleanHistory();
    // A fence handed out twice (a reused fence after a lost claim) must still be one replica's.
    history.writes.push(write("a", 2, 12_300));
    expect(staleWrites(history)).toEqual([
      {
        rule: "stale-write",
        at: 12_300,
        detail:
          "1 write(s) by a with fence 2 accepted after b's writes with the same fence, issued over 0 ms",
      },
    ]);
    expect(rules(history)).toEqual(["stale-write", "write-not-granted"]);
  });

  it("write-not-granted: a fence the table gave to another replica, or to no one", () => {
    const history = cleanHistory();
    history.writes.push(write("b", 3, 12_300));
    expect(rules(history)).toEqual(["write-not-granted"]);
    history.writes.splice(0, 1, { ...write("a", 2, 1_100), seq: 0 });
    expect(writesNotGranted(history).map((v) => v.detail)).toEqual([
      "1 write(s) by a with fence 2, which the lease table gave to b",
      "1 write(s) by b with fence 3, which the lease table never gave out",
    ]);
  });

  it("quiet-workload: a leader with a healthy link that got no write accepted for longer than the bound", () => {
    const history = cleanHistory();
    const gapFrom = 8_000;
    // On the workloads' 100 ms grid, so the write at gapTo is kept.
    const gapTo = gapFrom + Math.ceil((QUIET_BOUND_MS + 1) / 100) * 100;
    history.writes = history.writes.filter(
      (w) => w.replica !== "b" || w.issuedAt <= gapFrom || w.issuedAt >= gapTo,
    );
    const result = checkHistory(history);
    expect(result.violations).toEqual([
      {
        rule: "quiet-workload",
        at: gapFrom,
        detail: `b led with a healthy database link for 5000 ms but got no write accepted for ${gapTo - gapFrom} ms (bound ${QUIET_BOUND_MS} ms)`,
      },
    ]);
    expect(result.longestWriteGapMs).toBe(gapTo - gapFrom);
  });

  it("quiet-workload: workloads that never wrote fail the run (the stale-write rule would pass on nothing)", () => {
    const history = cleanHistory();
    history.writes = [];
    // a led for 2 s before its link was cut, within the bound; b led for 5 s.
    expect(checkHistory(history).violations).toEqual([
      {
        rule: "quiet-workload",
        at: 7_000,
        detail: `b led with a healthy database link for 5000 ms but got no write accepted for 5000 ms (bound ${QUIET_BOUND_MS} ms)`,
      },
    ]);
  });

  it("quiet-workload: no writes are expected while the leader's link is under a fault or it is paused", () => {
    const history = cleanHistory();
    // a keeps believing through its link cut and a pause, and writes neither during them.
    history.transitions[2] = { pid: 1, time: 6_990, outcome: "stepped-down", fence: 1 };
    history.pauses.push({ pid: 1, kind: "sigstop", from: 6_400, to: 6_700 });
    expect(rules(history)).toEqual([]);
    // Without the pause, a believed with a healed link from 6500 to 6990: quiet, but within the bound.
    history.pauses = [];
    expect(checkHistory(history).longestWriteGapMs).toBe(490);
  });
});

describe("chaos checker: the lease", () => {
  it("fence-order: a new term that does not raise the fence, in the lease table", () => {
    const history = cleanHistory();
    history.leaseRows[2] = { ...(history.leaseRows[2] as History["leaseRows"][number]), fence: 1 };
    expect(rules(history)).toContain("fence-order");
  });

  it("fence-order: a release after the server clock stepped back moves acquired_at behind the expiry; still the same term", () => {
    // The 30-minute run (seed 31): the release's END_TERM wrote acquired_at = now − 1 µs, earlier
    // than the term's own start, because the server clock had stepped back ~2 s; that row was
    // taken for a new term of the same holder with the same fence.
    const history = cleanHistory();
    history.leaseRows[4] = {
      ...(history.leaseRows[4] as History["leaseRows"][number]),
      acquiredAt: 6_999.999,
      expiresAt: 7_000,
    };
    expect(rules(history)).toEqual([]);
  });

  it("fence-order: the same holder's new term under the same fence, its start moved but not to a release's", () => {
    const history = cleanHistory();
    history.leaseRows[3] = { ...(history.leaseRows[3] as History["leaseRows"][number]), acquiredAt: 6_500 };
    expect(rules(history)).toContain("fence-order");
  });

  it("fence-order: a fence that changes inside one term", () => {
    const history = cleanHistory();
    history.leaseRows[1] = { ...(history.leaseRows[1] as History["leaseRows"][number]), fence: 3 };
    expect(rules(history)).toContain("fence-order");
  });

  it("fence-order: acquisitions logged out of fence order, shutdown included", () => {
    const history = cleanHistory();
    // After the fault phase, a logs fence 1 again: granted to it once, but b's 2 came in between.
    history.transitions.push({ pid: 1, time: 12_300, outcome: "acquired", fence: 1 });
    const result = checkHistory(history);
    expect(result.violations.map((v) => v.rule)).toEqual(["fence-order"]);
    expect(result.violations[0]?.detail).toBe("a-1 acquired fence 1 after b-1 acquired fence 2");
  });

  it("fence-not-granted: a fence the table gave to another holder of the same replica", () => {
    const history = cleanHistory();
    // b's restarted process (holder b-2) got fence 2; b-1 says it did.
    history.incarnations.push({ replica: "b", pid: 3, holder: "b-2", startedAt: 6_000, endedAt: 6_100 });
    history.leaseRows = history.leaseRows.map((r) => (r.holder === "b-1" ? { ...r, holder: "b-2" } : r));
    expect(rules(history)).toEqual(["fence-not-granted"]);
  });

  it("allows the same holder to take its own live term back with the same fence", () => {
    const history = cleanHistory();
    history.transitions.push({ pid: 2, time: 9_000, outcome: "stepped-down", fence: 2 });
    history.transitions.push({ pid: 2, time: 9_500, outcome: "acquired", fence: 2 });
    history.labels.splice(5, 1);
    history.labels.push(label(9_010, "pod-b", "follower"), label(9_510, "pod-b", "leader"));
    history.labels.push(label(12_150, "pod-b", "follower"));
    expect(rules(history)).toEqual([]);
  });

  it("term-overlap: another holder's claim before the previous term's expiry", () => {
    const history = cleanHistory();
    // A renew of a's term, committed during the link cut, promised it until 7500.
    history.leaseRows.splice(2, 0, row("a-1", 1, 1_000, 7_500, 5_500));
    history.leaseRows = inCommitOrder(history.leaseRows);
    const result = checkHistory(history);
    expect(result.violations.map((v) => v.rule)).toEqual(["term-overlap"]);
    expect(result.violations[0]?.detail).toBe(
      `lease ${LEASE}: b-1 started a term with fence 2 (row ${history.leaseRows[3]?.seq}) 500.000 ms before a-1's term with fence 1 ran out`,
    );
  });

  it("term-overlap: a late commit with an older clock does not take back an expiry already promised", () => {
    const history = cleanHistory();
    history.leaseRows.splice(2, 0, row("a-1", 1, 1_000, 7_500, 5_500), row("a-1", 1, 1_000, 6_800, 5_600));
    history.leaseRows = inCommitOrder(history.leaseRows);
    expect(rules(history)).toEqual(["term-overlap"]);
  });

  it("term-overlap: a restart takeover passes only with the same lock, taken by a process started after the old one died", () => {
    const X = `#r:${"a".repeat(32)}.7`;
    const history = cleanHistory();
    history.incarnations = [
      { replica: "a", pid: 1, holder: `a-1${X}`, startedAt: 0, endedAt: 4_000 },
      { replica: "a", pid: 3, holder: `a-2#r:${"a".repeat(32)}.9`, startedAt: 4_100, endedAt: 12_400 },
    ];
    // a-1's term was promised until 9000; the restarted a-2 takes it over at 4200.
    history.leaseRows = inCommitOrder([
      row(`a-1${X}`, 1, 1_000, 9_000, 3_000),
      row(`a-2#r:${"a".repeat(32)}.9`, 2, 4_200, 6_200, 4_200),
    ]);
    expect(termOverlaps(history)).toEqual([]);
    // Started before its predecessor was dead: the lock would not have let it bind.
    const early = {
      ...history,
      incarnations: history.incarnations.map((i) => (i.pid === 3 ? { ...i, startedAt: 3_900 } : i)),
    };
    expect(termOverlaps(early).map((v) => v.rule)).toEqual(["term-overlap"]);
    // Another lock proves nothing.
    const other = structuredClone(history);
    other.leaseRows = inCommitOrder([
      row(`a-1${X}`, 1, 1_000, 9_000, 3_000),
      row(`a-2#r:${"b".repeat(32)}.9`, 2, 4_200, 6_200, 4_200),
    ]);
    other.incarnations[1] = {
      replica: "a",
      pid: 3,
      holder: `a-2#r:${"b".repeat(32)}.9`,
      startedAt: 4_100,
      endedAt: 12_400,
    };
    expect(termOverlaps(other).map((v) => v.rule)).toEqual(["term-overlap"]);
  });

  it("term-overlap: a released term ends at its release, unless a renew brings it back", () => {
    const history = cleanHistory();
    history.leaseRows.splice(2, 0, row("a-1", 1, 1_000, 7_500, 5_500), row("a-1", 1, 1_000, 5_600, 5_600));
    history.leaseRows = inCommitOrder(history.leaseRows);
    expect(rules(history)).toEqual([]);
    history.leaseRows.splice(4, 0, row("a-1", 1, 1_000, 7_100, 5_700));
    history.leaseRows = inCommitOrder(history.leaseRows);
    expect(rules(history)).toEqual(["term-overlap"]);
  });
});

describe("chaos checker: beliefs", () => {
  it("two-believers: two running processes believing they lead at once", () => {
    const history = cleanHistory();
    // a steps down 3 ms after b acquired: beyond the 2 ms of timestamp rounding.
    history.transitions[2] = { pid: 1, time: 7_003, outcome: "stepped-down", fence: 1 };
    history.labels[3] = { ...(history.labels[3] as History["labels"][number]), time: 7_004 };
    const result = checkHistory(history);
    expect(result.violations.map((v) => v.rule)).toEqual(["two-believers"]);
    expect(result.violations[0]?.detail).toMatch(/both believed they led for 3 ms/);
  });

  it("takes 2 ms of overlap as timestamp rounding", () => {
    const history = cleanHistory();
    history.transitions[2] = { pid: 1, time: 7_002, outcome: "stepped-down", fence: 1 };
    history.labels[3] = { ...(history.labels[3] as History["labels"][number]), time: 7_003 };
    expect(rules(history)).toEqual([]);
  });

  it("two-believers: a paused belief does not count, but does once the wake-up grace is over", () => {
    const history = cleanHistory();
    // a SIGSTOPped from 4000 to 7500 while believing; it steps down 20 ms after waking.
    history.transitions[2] = { pid: 1, time: 7_520, outcome: "stepped-down", fence: 1 };
    history.labels[3] = { ...(history.labels[3] as History["labels"][number]), time: 7_010 };
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

  it("two-believers: a killed process's belief ends at its death, and not before", () => {
    const history = cleanHistory();
    history.transitions.splice(2, 1);
    history.incarnations[0] = { ...(history.incarnations[0] as Incarnation), endedAt: 4_000 };
    // The new leader demotes the dead one's pod before labelling itself.
    history.labels[3] = { ...(history.labels[3] as History["labels"][number]), time: 7_015 };
    expect(rules(history)).toEqual([]);
    history.incarnations[0] = { ...(history.incarnations[0] as Incarnation), endedAt: 7_100 };
    expect(rules(history)).toEqual(["two-believers"]);
  });

  it("a leader's belief ends with its 'resigned' line (a handover), before the next leader's", () => {
    const history = cleanHistory();
    // a hands over at 5 000 (its campaign gate closed) instead of stepping down.
    history.transitions[2] = { pid: 1, time: 5_000, outcome: "resigned", fence: 1 };
    const a = history.incarnations[0] as Incarnation;
    expect(believedIntervals(history, a)).toEqual([{ from: 1_000, to: 5_000 }]);
    expect(rules(history)).toEqual([]);
  });

  it("two-believers: during shutdown, after the fault phase", () => {
    const history = cleanHistory();
    // b's release commits at 12 190, a claims at 12 250, but b only stops believing at 12 300.
    history.transitions[4] = { pid: 2, time: 12_300, outcome: "released", fence: 2 };
    history.transitions.push({ pid: 1, time: 12_250, outcome: "acquired", fence: 3 });
    history.leaseRows.push(row("a-1", 3, 12_250, 14_250, 12_250));
    history.labels.push(label(12_260, "pod-a", "leader"));
    expect(WINDOW_TO).toBeLessThan(12_250);
    const result = checkHistory(history);
    expect(result.violations.map((v) => v.rule)).toEqual(["two-believers"]);
    expect(result.violations[0]?.detail).toMatch(/both believed they led for 50 ms/);
  });

  it("two-believers: a belief with no end lasts until the recording ends", () => {
    const history = cleanHistory();
    history.incarnations[1] = { ...(history.incarnations[1] as Incarnation), endedAt: null };
    // b neither releases nor exits; a claims at 12 300 and exits at 12 400.
    history.transitions.splice(4, 1);
    history.leaseRows.splice(4, 1);
    history.transitions.push({ pid: 1, time: END - 200, outcome: "acquired", fence: 3 });
    history.leaseRows.push(row("a-1", 3, END - 200, END + 1_800, END - 200));
    expect(rules(history)).toEqual(["term-overlap", "two-believers"]);
  });
});

describe("chaos checker: labels and liveness", () => {
  it("two-labelled: two pods labelled leader in one API server state", () => {
    const history = cleanHistory();
    // b labels itself before a's label is removed.
    const [demote, promote] = [history.labels[3], history.labels[4]] as [LabelChange, LabelChange];
    history.labels[3] = { ...demote, resourceVersion: promote.resourceVersion, time: 7_030 };
    history.labels[4] = { ...promote, resourceVersion: demote.resourceVersion };
    const result = checkHistory(history);
    expect(result.violations.map((v) => v.rule)).toEqual(["two-labelled"]);
    expect(result.violations[0]?.detail).toBe(
      "pods pod-a, pod-b carried the leader label together for 10 ms",
    );
  });

  it("two-labelled: during shutdown, and still at the end of the recording", () => {
    const history = cleanHistory();
    history.labels.splice(5, 1);
    history.labels.push(label(12_300, "pod-a", "leader"));
    const result = checkHistory(history);
    expect(result.violations.map((v) => v.rule)).toEqual(["two-labelled"]);
    expect(result.violations[0]?.detail).toBe("pods pod-a, pod-b still both labelled leader");
  });

  it("liveness: a heal not followed by a labelled leader within lease + 1 s", () => {
    const history = cleanHistory();
    history.slots[0] = { ...(history.slots[0] as History["slots"][number]), healedAt: 5_500 };
    // b's label arrives 3.52 s after the heal: over the 3 s bound.
    history.labels[4] = { ...(history.labels[4] as History["labels"][number]), time: 9_020 };
    const result = checkHistory(history);
    expect(result.violations.map((v) => v.rule)).toEqual(["liveness"]);
    expect(result.slots[0]?.recoveryMs).toBe(3_520);
  });

  it("liveness: a believing leader whose pod is not labelled does not count", () => {
    const history = cleanHistory();
    history.labels.splice(4, 1);
    expect(rules(history)).toEqual(["liveness"]);
  });

  it("liveness: a labelled pod whose process does not believe does not count", () => {
    const history = cleanHistory();
    // b's pod is labelled at 7020, but its process never says it acquired.
    history.transitions.splice(3, 2);
    expect(rules(history)).toEqual(["liveness"]);
  });
});
