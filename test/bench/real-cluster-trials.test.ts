// The real-cluster group's reading of one trial off the leader Service's endpoint timeline (the
// group itself boots the real cluster and runs only under `npm run bench`): which changes count as
// leadership moving, when the first new leader was routed to, and the windows with none and two.
import { describe, expect, it } from "vitest";
import { trialFigures } from "../../bench/cluster/handover-trials.ts";
import { shorterText } from "../../bench/groups/real-cluster.ts";
import type { Change } from "../cluster/endpoint-timeline.ts";

/** A timeline as watchEndpoints keeps it: each change holds until the next one. */
function timeline(changes: Change[]) {
  return {
    changes,
    durationWhere(when: (ready: string[]) => boolean, fromMs: number, toMs: number) {
      let total = 0;
      changes.forEach((change, i) => {
        if (!when(change.ready)) return;
        const end = Math.min(changes[i + 1]?.atMs ?? toMs, toMs);
        total += Math.max(0, end - Math.max(change.atMs, fromMs));
      });
      return total;
    },
  };
}

describe("a real-cluster trial's figures", () => {
  it("counts each move of the one ready endpoint to another pod, from the command on", () => {
    const trial = trialFigures(
      timeline([
        { atMs: 0, ready: ["a"] },
        { atMs: 100, ready: [] },
        { atMs: 400, ready: ["b"] },
        { atMs: 900, ready: [] },
        { atMs: 1_000, ready: ["c"] },
        { atMs: 1_500, ready: ["b", "c"] },
        { atMs: 1_520, ready: ["c"] },
      ]),
      "a",
      50,
      2_000,
    );
    expect(trial).toEqual({
      leaderlessMs: 400,
      twoReadyMs: 20,
      newLeaderEndpointMs: 350,
      leaderChanges: 2,
      settledMs: 1_950,
    });
  });

  it("does not count the old leader coming back as a move, nor changes before the command", () => {
    const trial = trialFigures(
      timeline([
        { atMs: 0, ready: ["x"] },
        { atMs: 10, ready: ["a"] },
        { atMs: 100, ready: [] },
        { atMs: 300, ready: ["a"] },
      ]),
      "a",
      50,
      500,
    );
    expect(trial.leaderChanges).toBe(0);
    expect(trial.newLeaderEndpointMs).toBe(450);
    expect(trial.leaderlessMs).toBe(200);
  });

  it("says pglease's leaderless time against client-go's as shorter or longer", () => {
    expect(shorterText(8.14)).toBe("8.1× shorter");
    expect(shorterText(0.5)).toBe("2.0× longer");
    expect(shorterText(Number.NaN)).toBe("n/a");
  });
});
