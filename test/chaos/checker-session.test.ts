// The checker under --session-takeover: a follower may take a live term once the holder's
// recorded session is gone (the server's own witness in the change log), and the old holder may
// believe, and label itself, until one renew interval plus the call timeout after the session
// ended, and not a moment longer; the takeover is a new term with a higher fence.
import { describe, expect, it } from "vitest";
import { checkHistory } from "./checker.ts";
import { cleanHistory, inCommitOrder, label, row, writesEvery } from "./checker-fixture.ts";
import type { History, InjectedFault } from "./history.ts";

const rules = (history: History) => checkHistory(history).violations.map((v) => v.rule);

/**
 * a (fence 1) leads from 1000; its recorded session is killed at 4000 (the answer, after the
 * backend exited, at 4010); b takes the live term over at 4150 with fence 2; a hears of it at
 * `aLostAt`. The window is renew + call timeout of a 2 s lease: 666 + 333 = 999 ms.
 */
function sessionKilledUnderLeader(aLostAt: number, options: { witnessed?: boolean; ended?: boolean } = {}) {
  const { witnessed = true, ended = true } = options;
  const history = cleanHistory();
  const end = { holder: "a-1", fence: 1, from: 4_000, to: 4_010 };
  const fault: InjectedFault = {
    kind: "leader-session-kill",
    target: "a (leader)",
    startedAt: 4_000,
    healedAt: 4_010,
    detail: "pg_terminate_backend of a's recorded session (backend 77, fence 1) while it runs",
    ...(ended ? { sessionEnded: [end] } : {}),
  };
  history.slots = [
    { index: 0, kind: "leader-session-kill", startedAt: 4_000, healedAt: 4_010, faults: [fault] },
  ];
  history.sessionEnds = ended ? [end] : [];
  history.transitions = [
    { pid: 1, time: 1_000, outcome: "acquired", fence: 1 },
    { pid: 2, time: 1_010, outcome: "held-by-other", fence: 1 },
    { pid: 2, time: 4_150, outcome: "acquired", fence: 2 },
    { pid: 1, time: aLostAt, outcome: "lost", fence: null },
    { pid: 2, time: 12_200, outcome: "released", fence: 2 },
  ];
  const takeover = { ...row("b-1", 2, 4_150, 6_150, 4_150), ...(witnessed ? { tookGoneSession: true } : {}) };
  history.leaseRows = inCommitOrder([
    row("a-1", 1, 1_000, 3_000, 1_000),
    // a's last renew before the kill: its term would run until 5900 by the lease.
    row("a-1", 1, 1_000, 5_900, 3_900),
    takeover,
    row("b-1", 2, 4_150, 13_500, 11_500),
    row("b-1", 2, 4_150, 12_190, 12_190),
  ]);
  history.writes = [...writesEvery("a", 1, 1_100, 4_100), ...writesEvery("b", 2, 4_200, 12_100)];
  history.rejections = [{ replica: "a", fence: 1, currentFence: 2, time: 4_300 }];
  history.labels = [
    label(500, "pod-a", "follower"),
    label(500, "pod-b", "follower"),
    label(1_020, "pod-a", "leader"),
    label(4_160, "pod-a", "follower"),
    label(4_170, "pod-b", "leader"),
    label(12_150, "pod-b", "follower"),
  ];
  return history;
}

describe("chaos checker: session takeover", () => {
  it("passes a takeover the server witnessed, the old holder believing within the window", () => {
    expect(rules(sessionKilledUnderLeader(4_600))).toEqual([]);
    // The last millisecond of the window: 4010 + 999.
    expect(rules(sessionKilledUnderLeader(5_009))).toEqual([]);
    expect(checkHistory(sessionKilledUnderLeader(4_600)).bounds.sessionEndGraceMs).toBe(999);
  });

  it("term-overlap: the same claim of a live term without the server's witness that the session was gone", () => {
    expect(rules(sessionKilledUnderLeader(4_600, { witnessed: false }))).toEqual(["term-overlap"]);
  });

  it("two-believers: the same overlap with no session end recorded", () => {
    expect(rules(sessionKilledUnderLeader(4_600, { ended: false }))).toEqual(["two-believers"]);
  });

  it("two-believers: the old holder believing past renew interval + call timeout after the end", () => {
    const result = checkHistory(sessionKilledUnderLeader(5_011));
    expect(result.violations.map((v) => v.rule)).toEqual(["two-believers"]);
    expect(result.violations[0]?.detail).toMatch(
      /a \(pid 1\) and b \(pid 2\) both believed they led for 861 ms/,
    );
  });

  it("two-believers: another holder's session end excuses nothing", () => {
    const history = sessionKilledUnderLeader(4_600);
    history.sessionEnds = [{ holder: "c-1", fence: 1, from: 4_000, to: 4_010 }];
    expect(rules(history)).toEqual(["two-believers"]);
  });

  // Issue 27: the leader's notice backend SIGSTOPped; the leader gave the session up while the
  // server still listed it, and the backend exited once continued. That end is the holder's doing.
  it("two-believers: the end of a session its holder gave up (leader-session-stall) excuses nothing", () => {
    const history = sessionKilledUnderLeader(4_600);
    const stall: InjectedFault = {
      kind: "leader-session-stall",
      target: "a (leader)",
      startedAt: 1_500,
      healedAt: 4_000,
      detail: "SIGSTOP of a's recorded session (backend 77, fence 1) for 2500 ms",
      sessionStalled: [{ holder: "a-1", fence: 1 }],
    };
    history.slots = [
      { index: 0, kind: "leader-session-stall", startedAt: 1_500, healedAt: 4_000, faults: [stall] },
    ];
    expect(rules(history)).toEqual(["two-believers"]);
  });

  it("two-believers: a belief that began after the session ended is never excused", () => {
    const history = sessionKilledUnderLeader(4_600);
    // b's belief starts before the kill: it cannot be the taker of a session gone later.
    history.transitions.push({ pid: 2, time: 3_950, outcome: "acquired", fence: 2 });
    expect(rules(history)).toContain("two-believers");
  });

  it("fence-order: a session takeover that keeps the old fence is not a new term", () => {
    const history = sessionKilledUnderLeader(4_600);
    history.leaseRows = history.leaseRows.map((r) => (r.holder === "b-1" ? { ...r, fence: 1 } : r));
    history.transitions = history.transitions.map((t) =>
      t.pid === 2 && t.fence === 2 ? { ...t, fence: 1 } : t,
    );
    history.writes = writesEvery("a", 1, 1_100, 4_100);
    expect(rules(history)).toContain("fence-order");
  });

  it("two-labelled: the old holder's label kept within the window passes, past it fails", () => {
    const history = sessionKilledUnderLeader(4_600);
    // a's pod is still labelled when b's is: a's own label comes off at `off`.
    const labelled = (off: number) => {
      const labels = history.labels.filter((l) => !(l.pod === "pod-a" && l.time === 4_160));
      const at = labels.findIndex((l) => l.time > 4_170);
      labels.splice(at, 0, label(off, "pod-a", "follower"));
      return { ...history, labels: labels.map((l, i) => ({ ...l, resourceVersion: 200 + i })) };
    };
    expect(rules(labelled(5_000))).toEqual([]);
    expect(rules(labelled(5_100))).toEqual(["two-labelled"]);
  });

  it("a leader paused through the kill: it must step down within the wake-up grace once continued", () => {
    const paused = (aLostAt: number) => {
      const history = sessionKilledUnderLeader(aLostAt);
      history.pauses = [{ pid: 1, kind: "sigstop", from: 3_950, to: 6_000 }];
      history.writes = [...writesEvery("a", 1, 1_100, 3_900), ...writesEvery("b", 2, 4_200, 12_100)];
      return history;
    };
    expect(rules(paused(6_150))).toEqual([]);
    // Continued at 6000 + 200 ms of grace, long past the session window: 50 ms too long.
    expect(rules(paused(6_250))).toEqual(["two-believers"]);
  });
});
