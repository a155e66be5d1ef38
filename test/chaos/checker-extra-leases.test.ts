// The leases a replica holds besides the primary (renewed and released through the batched
// statements) are judged too: a break on one of them is a violation, and their transitions
// never count for the primary's beliefs, labels or workload.
import { describe, expect, it } from "vitest";
import { checkHistory } from "./checker.ts";
import { cleanHistory } from "./checker-fixture.ts";
import type { History, LeaseRow, Transition } from "./history.ts";
import { batchedStatements } from "./lease-rules.ts";

const EXTRA = "chaos-batch-1";

let seq = 1_000;
const extraRow = (holder: string, fence: number, acquiredAt: number, expiresAt: number, loggedAt: number) =>
  ({ seq: ++seq, key: EXTRA, holder, fence, acquiredAt, expiresAt, loggedAt }) satisfies LeaseRow;

/** The clean history, with a holding the extra lease (fence 11) from 1000 and b taking it at 7000 (fence 12). */
function withExtraLease(): History {
  const history = cleanHistory();
  history.extraLeases = [EXTRA];
  const extra: Transition[] = [
    { pid: 1, time: 1_000, outcome: "acquired", fence: 11, key: EXTRA },
    { pid: 1, time: 5_000, outcome: "stepped-down", fence: 11, key: EXTRA },
    { pid: 2, time: 7_000, outcome: "acquired", fence: 12, key: EXTRA },
    { pid: 2, time: 12_200, outcome: "released", fence: 12, key: EXTRA },
  ];
  history.transitions.push(...extra);
  history.leaseRows.push(
    extraRow("a-1", 11, 1_000, 3_000, 1_000),
    extraRow("a-1", 11, 1_000, 4_300, 2_300),
    extraRow("b-1", 12, 7_000, 9_000, 7_000),
    extraRow("b-1", 12, 7_000, 12_190, 12_190),
  );
  return history;
}

describe("chaos checker: the extra leases", () => {
  it("a clean history with an extra lease passes, its transitions kept apart from the primary's", () => {
    const history = withExtraLease();
    // b believes it leads the extra lease while a leads the primary: two leases, no overlap.
    history.transitions.push({ pid: 2, time: 1_500, outcome: "acquired", fence: 13, key: "chaos-batch-2" });
    history.extraLeases?.push("chaos-batch-2");
    history.leaseRows.push({ ...extraRow("b-1", 13, 1_500, 3_500, 1_500), key: "chaos-batch-2" });
    expect(checkHistory(history).violations).toEqual([]);
  });

  it("counts the statements that renewed or released two leases at once: one clock, one holder", () => {
    // a renewed both of its terms to 4300 in one statement; b released both at 12 190 in one.
    expect(batchedStatements(withExtraLease())).toEqual({ renewMany: 1, releaseMany: 1 });
  });

  it("two believers of an extra lease are a violation", () => {
    const history = withExtraLease();
    history.transitions.push({ pid: 2, time: 4_000, outcome: "acquired", fence: 12, key: EXTRA });
    expect(checkHistory(history).violations.map((v) => [v.rule, v.detail.split(":")[0]])).toContainEqual([
      "two-believers",
      `lease ${EXTRA}`,
    ]);
  });

  it("a row DELETE of the primary lease excuses no believer of an extra lease", () => {
    const history = withExtraLease();
    // The primary's row deleted at 3990-4000 (a's belief in it is excused until 5000): the
    // extra lease's row was not touched, so b's belief in it from 4000 beside a's is a violation.
    const window = { from: 3_990, to: 4_000 };
    history.slots = [
      {
        index: 0,
        kind: "row-delete",
        startedAt: window.from,
        healedAt: window.to,
        faults: [
          {
            kind: "row-delete",
            target: null,
            startedAt: window.from,
            healedAt: window.to,
            detail: "DELETE of the lease row (a-1, fence 1)",
            serverEnded: [window],
          },
        ],
      },
    ];
    history.transitions.push({ pid: 2, time: 4_000, outcome: "acquired", fence: 12, key: EXTRA });
    expect(checkHistory(history).violations.map((v) => [v.rule, v.detail.split(":")[0]])).toContainEqual([
      "two-believers",
      `lease ${EXTRA}`,
    ]);
  });

  it("a term of an extra lease started before the previous one ran out is a violation", () => {
    // b's claim starts at 4000, while a's term runs until 4300.
    const broken = withExtraLease();
    broken.leaseRows = broken.leaseRows.map((r) =>
      r.key === EXTRA && r.holder === "b-1" && r.acquiredAt === 7_000 ? { ...r, acquiredAt: 4_000 } : r,
    );
    expect(checkHistory(broken).violations.map((v) => v.rule)).toContain("term-overlap");
  });

  it("a fence of an extra lease that does not rise is a violation", () => {
    const history = withExtraLease();
    history.leaseRows.push(extraRow("a-1", 10, 12_300, 14_000, 12_300));
    expect(checkHistory(history).violations.map((v) => v.rule)).toContain("fence-order");
  });

  it("without extraLeases named, the primary's rules ignore other leases' lines", () => {
    const history = withExtraLease();
    delete history.extraLeases;
    history.transitions.push({ pid: 2, time: 4_000, outcome: "acquired", fence: 12, key: EXTRA });
    expect(checkHistory(history).violations).toEqual([]);
  });
});
