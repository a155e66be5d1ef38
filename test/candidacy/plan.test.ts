// The pure ranking and choice of a handover's target (src/candidacy/plan.ts): who is best, who may
// take a lease from its holder, and whom a `--to` names, with the refusals an operator reads.
import { describe, expect, it } from "vitest";
import { chooseTarget, eligible, HandoverRefused, rankCandidates } from "../../src/candidacy/plan.ts";
import type { Candidate } from "../../src/postgres/candidates.ts";

const T0 = Date.parse("2030-01-01T00:00:00Z");

/** A live candidate that leads, of priority 0 and no revision, campaigning since T0 + `startedS` s. */
function candidate(holder: string, over: Partial<Candidate> & { startedS?: number } = {}): Candidate {
  const { startedS = 0, ...rest } = over;
  return {
    key: "k",
    holder,
    pod: `${holder}-pod`,
    priority: 0,
    revision: null,
    leads: true,
    live: true,
    startedAt: new Date(T0 + startedS * 1_000),
    seenAt: new Date(T0 + 60_000),
    ...rest,
  };
}

const holders = (cs: readonly Candidate[]) => cs.map((c) => c.holder);

describe("rankCandidates: best first", () => {
  it("higher priority first, whatever the revision or how long it campaigned", () => {
    const ranked = rankCandidates([
      candidate("old-low", { priority: 1, startedS: 0, revision: "r1" }),
      candidate("new-low", { priority: 1, startedS: 50, revision: "r2" }),
      candidate("high", { priority: 7, startedS: 10, revision: "r1" }),
      candidate("negative", { priority: -3, startedS: 60, revision: "r2" }),
    ]);
    expect(holders(ranked)).toEqual(["high", "new-low", "old-low", "negative"]);
  });

  it("at one priority, the newest revision (of the candidate that began last) before the longest campaigning", () => {
    // A rollout: r1's pods campaign since long, r2's began later; r2 goes first.
    const ranked = rankCandidates([
      candidate("r1-a", { startedS: 0, revision: "r1" }),
      candidate("r2-b", { startedS: 40, revision: "r2" }),
      candidate("r1-c", { startedS: 5, revision: "r1" }),
      candidate("r2-a", { startedS: 30, revision: "r2" }),
    ]);
    expect(holders(ranked)).toEqual(["r2-a", "r2-b", "r1-a", "r1-c"]);
  });

  it("a candidate without a revision does not make the newest revision, nor belong to it", () => {
    const ranked = rankCandidates([
      candidate("r1", { startedS: 10, revision: "r1" }),
      candidate("none-late", { startedS: 90, revision: null }),
      candidate("none-early", { startedS: 0, revision: null }),
    ]);
    // r1 is the newest revision (none-late has none): it goes first, then the longest campaigning.
    expect(holders(ranked)).toEqual(["r1", "none-early", "none-late"]);
  });

  it("without any revision: the longest campaigning first, then by holder, so the order never depends on the input's", () => {
    const cs = [
      candidate("c", { startedS: 5 }),
      candidate("b", { startedS: 0 }),
      candidate("a", { startedS: 5 }),
    ];
    expect(holders(rankCandidates(cs))).toEqual(["b", "a", "c"]);
    expect(holders(rankCandidates([...cs].reverse()))).toEqual(["b", "a", "c"]);
    // The input is left as it was.
    expect(holders(cs)).toEqual(["c", "b", "a"]);
  });

  it("ties go to the holder first in byte order, as the release's SQL breaks them (COLLATE \"C\"), not the locale's", () => {
    const cs = [candidate("a"), candidate("é"), candidate("B"), candidate("b-1"), candidate("b1")];
    expect(holders(rankCandidates(cs))).toEqual(["B", "a", "b-1", "b1", "é"]);
  });

  it("the newest revision's own tie (two began in the same millisecond) goes to the holder first, whatever the input order", () => {
    const cs = [
      candidate("y", { startedS: 9, revision: "r1" }),
      candidate("x", { startedS: 9, revision: "r2" }),
      candidate("early", { startedS: 0, revision: "r1" }),
    ];
    // x's r2 is the newest revision: x leads, then the longest campaigning.
    expect(holders(rankCandidates(cs))).toEqual(["x", "early", "y"]);
    expect(holders(rankCandidates([...cs].reverse()))).toEqual(["x", "early", "y"]);
  });
});

describe("eligible: who could take the lease from its holder now", () => {
  it("live candidates that lead, other than the holder", () => {
    const cs = [
      candidate("holder"),
      candidate("ready"),
      candidate("gone", { live: false }),
      candidate("no-lead", { leads: false }),
    ];
    expect(holders(eligible(cs, "holder"))).toEqual(["ready"]);
    expect(holders(eligible(cs, "ready"))).toEqual(["holder"]);
  });
});

describe("chooseTarget: the candidate `to` names, or the best", () => {
  const live = [
    candidate("p1-a", { pod: "p1", priority: 1 }),
    candidate("p1-b", { pod: "p1", priority: 1, startedS: 3 }),
    candidate("solo", { pod: "solo-pod", priority: 0 }),
    candidate("top", { pod: "top-pod", priority: 9, startedS: 20 }),
  ];

  it("without `to`, the best ranked", () => {
    expect(chooseTarget("k", live, undefined).holder).toBe("top");
  });

  it("by holder, or by a pod that has one candidate", () => {
    expect(chooseTarget("k", live, "p1-b").holder).toBe("p1-b");
    expect(chooseTarget("k", live, "solo-pod").holder).toBe("solo");
  });

  it("refuses a pod with several candidates, naming the holders to choose from", () => {
    expect(() => chooseTarget("k", live, "p1")).toThrow(
      new HandoverRefused(
        "cannot hand over lease k to p1: several processes of that pod campaign; name one holder: p1-a, p1-b",
      ),
    );
  });

  it("refuses a name that is no live candidate, listing the live ones with their priority", () => {
    const refused = (() => {
      try {
        chooseTarget("k", live.slice(2), "ghost");
      } catch (error) {
        return error;
      }
    })();
    expect(refused).toBeInstanceOf(HandoverRefused);
    expect((refused as Error).message).toBe(
      "cannot hand over lease k to ghost: not a live candidate; the live candidates are solo-pod (solo, priority 0), top-pod (top, priority 9)",
    );
  });

  it("refuses when there is nobody to hand over to", () => {
    expect(() => chooseTarget("k", [], undefined)).toThrow(
      new HandoverRefused("cannot hand over lease k: there is no live candidate"),
    );
    expect(() => chooseTarget("k", [], "anyone")).toThrow(
      /to anyone: not a live candidate; there is no live candidate$/,
    );
  });
});
