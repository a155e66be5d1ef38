import { describe, expect, it } from "vitest";
import { type ClusterLabels, crossClusterLabels, type HandOver } from "./cluster-labels.ts";
import type { LabelChange } from "./history.ts";

let version = 0;
const label = (time: number, pod: string, role: string | null): LabelChange => ({
  resourceVersion: ++version,
  time,
  pod,
  role,
});

// e0 of east leads from 1 s, dies at 5 s; w0 of west claims at 8 s and labels itself at 8.02 s.
const handOvers: HandOver[] = [
  { at: 1_000, cluster: "east" },
  { at: 8_000, cluster: "west" },
];
const west = (): ClusterLabels => ({
  cluster: "west",
  changes: [label(500, "w0", "follower"), label(8_020, "w0", "leader")],
});
const east = (demotedAt: number | null, unable?: ClusterLabels["unable"]): ClusterLabels => ({
  cluster: "east",
  changes: [
    label(500, "e0", "follower"),
    label(1_020, "e0", "leader"),
    ...(demotedAt === null ? [] : [label(demotedAt, "e0", "follower")]),
  ],
  ...(unable ? { unable } : {}),
});

describe("at most one pod labelled leader across clusters", () => {
  it("excuses the old cluster's stale label taken off within the grace of the change of hands", () => {
    expect(crossClusterLabels([east(8_300), west()], handOvers, 500)).toEqual([]);
  });

  it("reports it when it stays longer", () => {
    expect(crossClusterLabels([east(8_600), west()], handOvers, 500)).toEqual([
      expect.objectContaining({
        rule: "two-labelled-across-clusters",
        at: 8_020,
        detail: "pods east/e0, west/w0 carried the leader label in more than one cluster for 580 ms",
      }),
    ]);
  });

  it("and when it is never taken off", () => {
    expect(crossClusterLabels([east(null), west()], handOvers, 500)).toEqual([
      expect.objectContaining({
        rule: "two-labelled-across-clusters",
        detail: expect.stringMatching(/still/),
      }),
    ]);
  });

  it("excuses a cluster that could not act until the grace after it could again, and no longer", () => {
    const down = [{ from: 6_000, to: 20_000 }];
    expect(crossClusterLabels([east(20_400, down), west()], handOvers, 500)).toEqual([]);
    expect(crossClusterLabels([east(20_600, down), west()], handOvers, 500)).toHaveLength(1);
  });

  it("excuses nothing without a change of hands before the overlap", () => {
    const both: ClusterLabels[] = [
      { cluster: "east", changes: [label(100, "e0", "leader"), label(200, "e0", "follower")] },
      { cluster: "west", changes: [label(150, "w0", "leader")] },
    ];
    expect(crossClusterLabels(both, [], 10_000)).toHaveLength(1);
  });
});
