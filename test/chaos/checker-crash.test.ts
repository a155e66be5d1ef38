// The checker under --crash-takeover: a follower may take a live term once the holder's process
// has ended (the kubelet's report can only follow that end); the same takeover of a holder still
// running, or in a run without the option, is a term-overlap.
import { describe, expect, it } from "vitest";
import { checkHistory } from "./checker.ts";
import { cleanHistory, inCommitOrder, label, row, writesEvery } from "./checker-fixture.ts";
import type { History } from "./history.ts";

/** a (fence 1) leads from 1000 and is killed at `aEndedAt`; b takes its live term at 4150 (a's ran to 5900). */
function crashedLeader(aEndedAt: number): History {
  const history = cleanHistory();
  history.incarnations = [
    { replica: "a", pid: 1, holder: "a-1", startedAt: 0, endedAt: aEndedAt },
    { replica: "b", pid: 2, holder: "b-1", startedAt: 0, endedAt: 12_450 },
  ];
  history.slots = [
    {
      index: 0,
      kind: "leader-crash-reported",
      startedAt: 3_950,
      healedAt: 8_000,
      faults: [
        {
          kind: "leader-crash-reported",
          target: "a (leader)",
          startedAt: 3_950,
          healedAt: 8_000,
          detail: "SIGKILL of the sidecar, reported terminated by the kubelet 150 ms later",
        },
      ],
    },
  ];
  history.transitions = [
    { pid: 1, time: 1_000, outcome: "acquired", fence: 1 },
    { pid: 2, time: 1_010, outcome: "held-by-other", fence: 1 },
    { pid: 2, time: 4_150, outcome: "acquired", fence: 2 },
    { pid: 2, time: 12_200, outcome: "released", fence: 2 },
  ];
  history.leaseRows = inCommitOrder([
    row("a-1", 1, 1_000, 3_000, 1_000),
    row("a-1", 1, 1_000, 5_900, 3_900),
    row("b-1", 2, 4_150, 6_150, 4_150),
    row("b-1", 2, 4_150, 13_500, 11_500),
    row("b-1", 2, 4_150, 12_190, 12_190),
  ]);
  history.writes = [...writesEvery("a", 1, 1_100, 3_900), ...writesEvery("b", 2, 4_200, 12_100)];
  history.rejections = [];
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

const rules = (history: History, crashTakeover: boolean) =>
  checkHistory(history, { crashTakeover }).violations.map((v) => v.rule);

describe("chaos checker: crash takeover", () => {
  it("passes a takeover of a live term whose holder's process had ended", () => {
    expect(rules(crashedLeader(3_950), true)).toEqual([]);
  });

  it("term-overlap: the same takeover without --crash-takeover, or of a holder that ended only after it", () => {
    expect(rules(crashedLeader(3_950), false)).toEqual(["term-overlap"]);
    expect(rules(crashedLeader(4_200), true)).toContain("term-overlap");
  });
});
