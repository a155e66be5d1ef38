import { expect, it } from "vitest";
import { leadershipTransitions } from "../../src/kube/leadership-events.ts";

const lease = "orders-sync";
const leader = (fence: number) => ({ lease, role: "leader", fence, holder: "me" }) as const;
const follower = { lease, role: "follower", fence: null, holder: "" } as const;

it.each([
  ["start as follower", undefined, follower, []],
  [
    "start as leader",
    undefined,
    leader(3),
    ["LeaderElected: p became leader of lease orders-sync with fence 3"],
  ],
  ["gain", follower, leader(4), ["LeaderElected: p became leader of lease orders-sync with fence 4"]],
  ["loss", leader(4), follower, ["LeadershipLost: p lost lease orders-sync (fence 4)"]],
  [
    "a new term without a follower step in between",
    leader(4),
    leader(6),
    [
      "LeadershipLost: p lost lease orders-sync (fence 4)",
      "LeaderElected: p became leader of lease orders-sync with fence 6",
    ],
  ],
  ["same term, new holder text", leader(4), { ...leader(4), holder: "other" }, []],
  ["follower to follower", follower, { ...follower, holder: "x" }, []],
] as const)("%s", (_, previous, next, expected) => {
  expect(leadershipTransitions(previous, next, "p").map((e) => `${e.reason}: ${e.message}`)).toEqual(
    expected,
  );
});
