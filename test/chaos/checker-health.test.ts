// The checker on health-gated leadership: a leader whose application stays unready while another
// pod's is ready must be caught, and a health handover (the "resigned" line, then the other pod's
// claim) must pass, the two-believers rule included.
import { describe, expect, it } from "vitest";
import { checkHistory } from "./checker.ts";
import { cleanHistory, label, row, writesEvery } from "./checker-fixture.ts";
import { unreadyLeaders } from "./health-rules.ts";
import type { History } from "./history.ts";

// The fixture's lease is 2 s: grace 667 ms + lease 2000 ms + 1000 ms.
const BOUND_MS = 3_667;

/** b leads from 7000 (labelled at 7020); its application turns unready at 8000. */
function unreadyFrom8000(): History {
  const history = cleanHistory();
  history.appReadiness = [{ pod: "pod-b", time: 8_000, ready: false }];
  history.slots.push({
    index: 1,
    kind: "app-unready",
    startedAt: 8_000,
    healedAt: 9_500,
    faults: [
      { kind: "app-unready", target: "b (leader)", startedAt: 8_000, healedAt: 9_500, detail: "unready" },
    ],
  });
  return history;
}

/** As the gate does it: b hands over at 8667, a claims fence 3 at 8900; b's application is back at 9500. */
function handedOver(): History {
  const history = unreadyFrom8000();
  history.appReadiness.push({ pod: "pod-b", time: 9_500, ready: true });
  history.transitions = [
    ...history.transitions.filter((t) => t.time < 7_500),
    { pid: 2, time: 8_667, outcome: "resigned", fence: 2 },
    { pid: 1, time: 8_900, outcome: "acquired", fence: 3 },
    { pid: 1, time: 12_200, outcome: "released", fence: 3 },
  ];
  history.leaseRows = [
    ...history.leaseRows.filter((r) => r.holder === "a-1" || r.loggedAt === 7_000),
    row("b-1", 2, 7_000, 8_670, 8_670),
    row("a-1", 3, 8_900, 10_900, 8_900),
    row("a-1", 3, 8_900, 13_900, 11_900),
    row("a-1", 3, 8_900, 12_190, 12_190),
  ];
  history.writes = [
    ...history.writes.filter((w) => w.replica === "a" || w.issuedAt <= 8_600),
    ...writesEvery("a", 3, 9_000, 12_100),
  ];
  history.labels = [
    ...history.labels.filter((l) => l.time <= 7_020),
    label(8_680, "pod-b", "follower"),
    label(8_920, "pod-a", "leader"),
    label(12_150, "pod-a", "follower"),
  ];
  return history;
}

describe("chaos checker: the labelled leader's application", () => {
  it("passes a health handover: b resigns after the grace period and a leads", () => {
    const result = checkHistory(handedOver());
    expect(result.violations).toEqual([]);
    expect(result.bounds.unreadyLeaderBoundMs).toBe(BOUND_MS);
    expect(result.slots[1]).toEqual({
      index: 1,
      kind: "app-unready",
      failoverMs: 8_920 - 8_667,
      recoveryMs: 0,
    });
  });

  it("two-believers: a resigned leader's belief ends at its 'resigned' line", () => {
    const history = handedOver();
    // Logged later than a's claim, the handover overlaps it.
    history.transitions = history.transitions.map((t) =>
      t.outcome === "resigned" ? { ...t, time: 8_950 } : t,
    );
    expect(checkHistory(history).violations.map((v) => v.rule)).toEqual(["two-believers"]);
  });

  it("unready-leader: a pod labelled leader with its application unready past the bound while another's is ready", () => {
    const result = checkHistory(unreadyFrom8000());
    // b kept the label until 12 150 with an unready application; a's application was ready.
    expect(result.violations).toEqual([
      {
        rule: "unready-leader",
        at: 8_000,
        detail: `pod-b stayed labelled leader with its application unready for 4150 ms while another pod's application was ready (bound ${BOUND_MS} ms)`,
      },
    ]);
  });

  it("unready-leader: within the bound, or with no other pod's application ready, it passes", () => {
    const history = unreadyFrom8000();
    history.appReadiness.push({ pod: "pod-b", time: 8_000 + BOUND_MS, ready: true });
    expect(unreadyLeaders(history, BOUND_MS)).toEqual([]);
    history.appReadiness[1] = { pod: "pod-b", time: 8_001 + BOUND_MS, ready: true };
    expect(unreadyLeaders(history, BOUND_MS).map((v) => v.detail)).toEqual([
      `pod-b stayed labelled leader with its application unready for ${BOUND_MS + 1} ms while another pod's application was ready (bound ${BOUND_MS} ms)`,
    ]);
    // A fleet that is all unhealthy keeps its leader: a's application unready too from 8500 on.
    const allDown = unreadyFrom8000();
    allDown.appReadiness.push({ pod: "pod-a", time: 8_500, ready: false });
    expect(unreadyLeaders(allDown, BOUND_MS)).toEqual([]);
  });

  it("unready-leader: still labelled when the recording ends", () => {
    const history = unreadyFrom8000();
    history.labels = history.labels.filter((l) => l.time < 12_000);
    expect(unreadyLeaders(history, BOUND_MS).map((v) => v.detail)).toEqual([
      `pod-b stayed labelled leader with its application unready for 4500 ms while another pod's application was ready (bound ${BOUND_MS} ms), until the recording ended`,
    ]);
  });
});
