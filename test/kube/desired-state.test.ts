import type { V1Pod } from "@kubernetes/client-node";
import { describe, expect, it } from "vitest";
import { conditionPatch, desiredPod, metadataPatch, podShows } from "../../src/kube/desired-state.ts";
import { type PublishConfig, validatePublishConfig } from "../../src/kube/publish-config.ts";

function config(): PublishConfig {
  const result = validatePublishConfig({ namespace: "shop", podName: "orders-0" });
  if ("problems" in result) throw new Error(result.problems.join("; "));
  return result.config;
}

const leader = { lease: "orders-sync", role: "leader", fence: 42, holder: "orders-0-a1b2" } as const;
const follower = { lease: "orders-sync", role: "follower", fence: null, holder: "orders-1-c3d4" } as const;
const now = new Date("2025-03-01T10:00:00.123Z");

function podShowing(state: typeof leader | typeof follower, since = "2025-01-01T00:00:00Z"): V1Pod {
  const want = desiredPod(state, config());
  return {
    metadata: {
      name: "orders-0",
      labels: { app: "orders", ...want.labels },
      annotations: Object.fromEntries(
        Object.entries(want.annotations).filter((e): e is [string, string] => e[1] !== null),
      ),
    },
    status: {
      conditions: [
        { type: "Ready", status: "True" },
        { ...want.condition, lastTransitionTime: new Date(since) },
      ],
    },
  };
}

describe("desired pod state", () => {
  it("maps a leader to the leader label, fence annotations and a True condition", () => {
    expect(desiredPod(leader, config())).toEqual({
      labels: { "pglease.io/role": "leader" },
      annotations: {
        "pglease.io/fence": "42",
        "pglease.io/holder": "orders-0-a1b2",
        "pglease.io/lease": "orders-sync",
        // Absent: a leader campaigns (a follower whose health gate is closed says why here).
        "pglease.io/not-campaigning": null,
      },
      condition: {
        type: "pglease.io/leader",
        status: "True",
        reason: "LeaseHeld",
        message: "holds lease orders-sync with fence 42",
      },
    });
  });

  it("maps a follower to the follower label, no fence and a False condition", () => {
    const want = desiredPod(follower, config());
    expect(want.labels).toEqual({ "pglease.io/role": "follower" });
    expect(want.annotations["pglease.io/fence"]).toBeNull();
    expect(want.condition).toMatchObject({ status: "False", reason: "LeaseNotHeld" });
  });

  it("uses the configured keys and values", () => {
    const custom = validatePublishConfig({
      namespace: "shop",
      podName: "orders-0",
      roleLabel: "example.com/role",
      leaderValue: "primary",
      followerValue: "replica",
      fenceAnnotation: "example.com/fence",
      conditionType: "example.com/Primary",
    });
    if ("problems" in custom) throw new Error(custom.problems.join("; "));
    const want = desiredPod(leader, custom.config);
    expect(want.labels).toEqual({ "example.com/role": "primary" });
    expect(want.annotations["example.com/fence"]).toBe("42");
    expect(want.condition.type).toBe("example.com/Primary");
  });
});

describe("patches", () => {
  it("patches nothing when the pod already shows the state", () => {
    const want = desiredPod(leader, config());
    const pod = podShowing(leader);
    expect(metadataPatch(want, pod)).toBeNull();
    expect(conditionPatch(want, pod, now)).toBeNull();
    expect(podShows(want, pod)).toBe(true);
  });

  it("patches only the keys that differ, deleting the fence with null", () => {
    const want = desiredPod(follower, config());
    expect(metadataPatch(want, podShowing(leader))).toEqual({
      metadata: {
        labels: { "pglease.io/role": "follower" },
        annotations: { "pglease.io/fence": null, "pglease.io/holder": "orders-1-c3d4" },
      },
    });
  });

  it("sends only annotations when only the fence changed", () => {
    const want = desiredPod({ ...leader, fence: 43 }, config());
    expect(metadataPatch(want, podShowing(leader))).toEqual({
      metadata: { annotations: { "pglease.io/fence": "43" } },
    });
  });

  it("moves lastTransitionTime only when the status flips", () => {
    const flipped = conditionPatch(desiredPod(follower, config()), podShowing(leader), now);
    expect(flipped?.status.conditions).toEqual([
      {
        type: "pglease.io/leader",
        status: "False",
        reason: "LeaseNotHeld",
        message: "does not hold lease orders-sync",
        lastTransitionTime: "2025-03-01T10:00:00Z",
      },
    ]);
    const sameStatus = conditionPatch(
      desiredPod({ ...leader, fence: 43 }, config()),
      podShowing(leader),
      now,
    );
    expect(sameStatus?.status.conditions[0]).toEqual({
      type: "pglease.io/leader",
      status: "True",
      reason: "LeaseHeld",
      message: "holds lease orders-sync with fence 43",
    });
  });

  it("adds the condition with a transition time to a pod that has none, leaving others to the strategic merge", () => {
    const patch = conditionPatch(desiredPod(follower, config()), { metadata: { name: "orders-0" } }, now);
    expect(patch?.status.conditions).toHaveLength(1);
    expect(patch?.status.conditions[0]?.lastTransitionTime).toBe("2025-03-01T10:00:00Z");
  });

  it("treats an unknown pod as showing nothing", () => {
    const want = desiredPod(leader, config());
    expect(podShows(want, undefined)).toBe(false);
    expect(metadataPatch(want, undefined)?.metadata.labels).toEqual({ "pglease.io/role": "leader" });
  });
});
