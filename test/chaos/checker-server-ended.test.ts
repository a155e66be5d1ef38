// The checker on terms the server ended behind their holder's back (row DELETE, DROP TABLE, a
// forward clock step): the holder may believe, and label itself, until its next renew answers,
// and not a moment longer; and fences must still never go backwards.
import { describe, expect, it } from "vitest";
import { checkHistory } from "./checker.ts";
import { cleanHistory, inCommitOrder, label, row, write, writesEvery } from "./checker-fixture.ts";
import type { History, InjectedFault } from "./history.ts";

const rules = (history: History) => checkHistory(history).violations.map((v) => v.rule);

/**
 * a (fence 1) leads from 1000; the lease row is deleted at 4000 (answer at 4010); b claims at
 * 4200 with fence 2; a hears it at its next renew, `aLostAt`. The grace is half the 2 s lease.
 */
function deletedUnderLeader(aLostAt: number, serverEnded = true): History {
  const history = cleanHistory();
  const fault: InjectedFault = {
    kind: "row-delete",
    target: null,
    startedAt: 4_000,
    healedAt: 4_010,
    detail: "DELETE of the lease row (a-1, fence 1)",
    ...(serverEnded ? { serverEnded: [{ from: 4_000, to: 4_010 }] } : {}),
  };
  history.slots = [{ index: 0, kind: "row-delete", startedAt: 4_000, healedAt: 4_010, faults: [fault] }];
  history.transitions = [
    { pid: 1, time: 1_000, outcome: "acquired", fence: 1 },
    { pid: 2, time: 1_010, outcome: "held-by-other", fence: 1 },
    { pid: 2, time: 4_200, outcome: "acquired", fence: 2 },
    { pid: 1, time: aLostAt, outcome: "lost", fence: null },
    { pid: 2, time: 12_200, outcome: "released", fence: 2 },
  ];
  history.leaseRows = inCommitOrder([
    row("a-1", 1, 1_000, 3_000, 1_000),
    row("a-1", 1, 1_000, 5_900, 3_900),
    // The removal, logged as a term that ends where it began.
    row("a-1", 1, 1_000, 1_000, 4_005),
    row("b-1", 2, 4_200, 6_200, 4_200),
    row("b-1", 2, 4_200, 13_500, 11_500),
    row("b-1", 2, 4_200, 12_190, 12_190),
  ]);
  history.writes = [...writesEvery("a", 1, 1_100, 4_100), ...writesEvery("b", 2, 4_300, 12_100)];
  history.rejections = [];
  history.labels = [
    label(500, "pod-a", "follower"),
    label(500, "pod-b", "follower"),
    label(1_020, "pod-a", "leader"),
    label(4_210, "pod-a", "follower"),
    label(4_220, "pod-b", "leader"),
    label(12_150, "pod-b", "follower"),
  ];
  return history;
}

describe("chaos checker: terms the server ended behind the holder's back", () => {
  it("lets the old holder believe until its next renew answers, within the grace", () => {
    expect(rules(deletedUnderLeader(4_900))).toEqual([]);
    expect(checkHistory(deletedUnderLeader(4_900)).bounds.serverEndGraceMs).toBe(1_000);
  });

  it("two-believers: the same overlap without a server-ended window", () => {
    expect(rules(deletedUnderLeader(4_900, false))).toEqual(["two-believers"]);
  });

  it("two-believers: an old holder still believing past the grace", () => {
    // 4010 + 1000 = 5010: a believes 40 ms longer.
    const result = checkHistory(deletedUnderLeader(5_050));
    expect(result.violations.map((v) => v.rule)).toEqual(["two-believers"]);
    expect(result.violations[0]?.detail).toMatch(/both believed they led for 850 ms/);
  });

  /**
   * a's renew after the removal gets no answer (timed out under load, its log says so): it cannot
   * learn of the removal and believes until its local deadline, its last good renew's send (at
   * most 3900, that renew's commit) + lease - safety margin = 5234, then steps down.
   */
  function unanswered(steppedDownAt: number, errorsAt: number[] = [4_700, 5_133]): History {
    const history = deletedUnderLeader(5_000);
    history.transitions = [
      ...history.transitions.filter((t) => !(t.pid === 1 && t.outcome === "lost")),
      ...errorsAt.map((time) => ({ pid: 1, time, outcome: "transient-error", fence: null })),
      { pid: 1, time: steppedDownAt, outcome: "stepped-down", fence: 1 },
    ];
    return history;
  }

  it("lets a holder whose renew got no answer believe until its local deadline, not past it", () => {
    // 5234 is 1224 ms after the window: past the 1 s grace, inside lease - margin (1334 ms).
    expect(rules(unanswered(5_234))).toEqual([]);
    expect(checkHistory(unanswered(5_234)).bounds.unansweredRenewGraceMs).toBe(1_334);
    // 4010 + 1334 = 5344: no local deadline of a renew sent before the window's end is later.
    expect(rules(unanswered(5_350))).toEqual(["two-believers"]);
  });

  it("two-believers: past the grace with no renew left unanswered (an answer ends the belief)", () => {
    expect(rules(unanswered(5_234, []))).toEqual(["two-believers"]);
    // A renew that timed out before the removal says nothing about the one after it.
    expect(rules(unanswered(5_234, [3_500]))).toEqual(["two-believers"]);
  });

  it("two-believers: a belief that began after the removal is never excused", () => {
    const history = deletedUnderLeader(4_900);
    // a takes a new term at 4100 with its old fence: not the holder the removal surprised.
    history.transitions.push({ pid: 1, time: 4_100, outcome: "acquired", fence: 1 });
    history.transitions.push({ pid: 1, time: 4_150, outcome: "lost", fence: null });
    history.transitions.push({ pid: 1, time: 4_300, outcome: "acquired", fence: 1 });
    expect(rules(history)).toContain("two-believers");
  });

  it("two-labelled: the old holder labelling itself again is excused only within the grace", () => {
    const history = deletedUnderLeader(4_900);
    history.labels.splice(5, 0, label(4_300, "pod-a", "leader"), label(4_950, "pod-a", "follower"));
    history.labels = history.labels.map((l, i) => ({ ...l, resourceVersion: 100 + i }));
    expect(rules(history)).toEqual([]);
    history.labels[6] = { ...(history.labels[6] as History["labels"][number]), time: 5_200 };
    expect(rules(history)).toEqual(["two-labelled"]);
  });

  it("fence-order: fences that restart after a table drop are caught", () => {
    const history = deletedUnderLeader(4_900);
    // As if the migration after a DROP TABLE had restarted the counter: b gets fence 1 again.
    history.leaseRows = inCommitOrder(
      history.leaseRows.map((r) => (r.holder === "b-1" ? { ...r, fence: 1 } : r)),
    );
    history.transitions = history.transitions.map((t) =>
      t.pid === 2 && t.fence === 2 ? { ...t, fence: 1 } : t,
    );
    history.writes = [...writesEvery("a", 1, 1_100, 4_100), write("b", 1, 4_300)];
    expect(new Set(rules(history))).toEqual(new Set(["fence-order", "stale-write", "quiet-workload"]));
  });
});
