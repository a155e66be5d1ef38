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
    // 5234 is 1224 ms after the window: past the 1 s grace, at its deadline.
    expect(rules(unanswered(5_234))).toEqual([]);
    expect(checkHistory(unanswered(5_234)).bounds.safetyMarginMs).toBe(666);
    // Its deadline timer may run up to the wake-up grace late (200 ms): 5434 is the last instant.
    expect(rules(unanswered(5_400))).toEqual([]);
    expect(rules(unanswered(5_440))).toEqual(["two-believers"]);
  });

  it("bounds that belief by the holder's own last renew, not by the window's end", () => {
    // a's last good renew committed at 3500 (expiry 5500): its deadline is at most 4834, so a
    // belief until 5300 is 266 ms past it and the wake-up grace; the window's end + 1334 (5344)
    // let it pass.
    const history = unanswered(5_300);
    history.leaseRows = inCommitOrder(
      history.leaseRows.map((r) => (r.loggedAt === 3_900 ? { ...r, expiresAt: 5_500, loggedAt: 3_500 } : r)),
    );
    expect(rules(history)).toEqual(["two-believers"]);
    history.transitions = history.transitions.map((t) =>
      t.outcome === "stepped-down" ? { ...t, time: 5_030 } : t,
    );
    expect(rules(history)).toEqual([]);
  });

  it("counts the deadline from the expiry the holder was answered with, which may exceed the lease", () => {
    // A renew keeps the later of the row's expiry and now + lease: after a forward clock step
    // healed, the expiry written under the stepped clock stands, and the answer's ttl (2.4 s here)
    // puts the holder's deadline at 6300 - 666 = 5634, past the window's end + 1334 (5344).
    const history = unanswered(5_600);
    history.leaseRows = inCommitOrder(
      history.leaseRows.map((r) => (r.loggedAt === 3_900 ? { ...r, expiresAt: 6_300 } : r)),
    );
    expect(rules(history)).toEqual([]);
  });

  it("falls back to the window's end when the server's clock stamped the last renew while stepped back", () => {
    // The clock was 900 ms behind from 3400 to 3990: the renew sent at 3800 was stamped 2900,
    // expiry 4900; its deadline is 5134 on this machine's clock, past 4900 - 666 + 200.
    const history = unanswered(5_134);
    history.leaseRows = inCommitOrder(
      history.leaseRows.map((r) => (r.loggedAt === 3_900 ? { ...r, expiresAt: 4_900, loggedAt: 2_900 } : r)),
    );
    const step: InjectedFault = {
      kind: "clock-step",
      target: null,
      startedAt: 3_400,
      healedAt: 3_990,
      detail: "server clock stepped back 900 ms for 590 ms, then back",
    };
    history.slots = [
      { index: 1, kind: "clock-step", startedAt: 3_400, healedAt: 3_990, faults: [step] },
      ...history.slots,
    ];
    expect(rules(history)).toEqual([]);
  });

  /**
   * The table dropped at 4000 and migrated again at 6000 (2 s, the schedule's longest); b claims
   * at 6100. a's last good renew committed at 3900 (expiry 5900): its deadline is at most 5234,
   * long before the window ends; `aTransitions` say how its belief ended.
   */
  function droppedUnderLeader(aTransitions: History["transitions"]): History {
    const history = deletedUnderLeader(5_000);
    const fault: InjectedFault = {
      kind: "table-drop",
      target: null,
      startedAt: 4_000,
      healedAt: 6_000,
      detail: "DROP TABLE with 1 row(s), migrated again after 2000 ms",
      serverEnded: [{ from: 4_000, to: 6_000 }],
    };
    history.slots = [{ index: 0, kind: "table-drop", startedAt: 4_000, healedAt: 6_000, faults: [fault] }];
    history.transitions = [
      { pid: 1, time: 1_000, outcome: "acquired", fence: 1 },
      { pid: 2, time: 1_010, outcome: "held-by-other", fence: 1 },
      { pid: 2, time: 6_100, outcome: "acquired", fence: 2 },
      ...aTransitions,
      { pid: 2, time: 12_200, outcome: "released", fence: 2 },
    ];
    history.leaseRows = inCommitOrder(
      history.leaseRows.map((r) =>
        r.holder === "b-1" && r.loggedAt === 4_200 ? row("b-1", 2, 6_100, 8_100, 6_100) : r,
      ),
    ).map((r) => (r.holder === "b-1" ? { ...r, acquiredAt: 6_100 } : r));
    // The guard keeps its own fence row: a's fence-1 writes pass until b's fence 2 reaches it.
    history.writes = [...writesEvery("a", 1, 1_100, 6_000), ...writesEvery("b", 2, 6_200, 12_100)];
    history.labels = [
      label(500, "pod-a", "follower"),
      label(500, "pod-b", "follower"),
      label(1_020, "pod-a", "leader"),
      label(6_110, "pod-a", "follower"),
      label(6_120, "pod-b", "leader"),
      label(12_150, "pod-b", "follower"),
    ];
    return history;
  }

  it("two-believers: a table drop's long window excuses no belief past the holder's own deadline", () => {
    // Its renews fail from the DROP on; believing until 7300 is 2 s past its deadline, though
    // within the window's end (the migration) + 1334.
    const unansweredPast = droppedUnderLeader([
      { pid: 1, time: 4_100, outcome: "transient-error", fence: null },
      { pid: 1, time: 7_300, outcome: "stepped-down", fence: 1 },
    ]);
    expect(rules(unansweredPast)).toEqual(["two-believers"]);
    // Nor an answer heard within the half-lease grace after the migration: its deadline came first.
    const answeredPast = droppedUnderLeader([{ pid: 1, time: 6_500, outcome: "lost", fence: null }]);
    expect(rules(answeredPast)).toEqual(["two-believers"]);
    // Stepping down at its deadline overlaps nobody.
    const atDeadline = droppedUnderLeader([
      { pid: 1, time: 4_100, outcome: "transient-error", fence: null },
      { pid: 1, time: 5_234, outcome: "stepped-down", fence: 1 },
    ]);
    expect(rules(atDeadline)).toEqual([]);
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

  it("two-labelled: the old holder labelling itself again while it still believes is never excused", () => {
    // b fenced pod-a off (superseded-by) before it labelled itself at 4220, so a's publisher's
    // patch is refused (422) however long a believes: pod-contract.md, "a late label never lands".
    const history = deletedUnderLeader(4_900);
    history.labels.splice(5, 0, label(4_300, "pod-a", "leader"), label(4_340, "pod-a", "follower"));
    history.labels = history.labels.map((l, i) => ({ ...l, resourceVersion: 100 + i }));
    expect(rules(history)).toEqual(["two-labelled"]);
    // Also within an unanswered renew's longer belief (a believes until 5200; b demotes it 40 ms on).
    const longer = unanswered(5_200);
    longer.labels.splice(5, 0, label(5_050, "pod-a", "leader"), label(5_090, "pod-a", "follower"));
    longer.labels = longer.labels.map((l, i) => ({ ...l, resourceVersion: 100 + i }));
    expect(rules(unanswered(5_200))).toEqual([]);
    expect(rules(longer)).toEqual(["two-labelled"]);
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
