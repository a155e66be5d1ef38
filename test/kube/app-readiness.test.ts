// How a peer's pod is judged as a candidate for a health handover in `--health-gate url` mode.
import { describe, expect, it } from "vitest";
import { containersReady } from "../../src/kube/app-readiness.ts";
import type { Pod } from "../../src/kube/client/api-types.ts";

function peer(conditions: Record<string, "True" | "False">, annotations: Record<string, string> = {}): Pod {
  return {
    metadata: { name: "orders-1", annotations },
    status: { conditions: Object.entries(conditions).map(([type, status]) => ({ type, status })) },
  } as Pod;
}

describe("a candidate by its pod's conditions (--health-gate url)", () => {
  it("is ready by ContainersReady: a readiness gate on the leader condition keeps a follower's Ready False", () => {
    expect(containersReady(peer({ Ready: "False", ContainersReady: "True" }))).toBe(true);
    expect(containersReady(peer({ Ready: "True", ContainersReady: "False" }))).toBe(false);
    expect(containersReady(peer({ Ready: "True" }))).toBe(false);
  });

  it("is no candidate while it does not campaign or is going away", () => {
    const settling = peer({ ContainersReady: "True" }, { "pglease.io/not-campaigning": "settle period" });
    expect(containersReady(settling)).toBe(false);
    const going = peer({ ContainersReady: "True" });
    going.metadata = { ...going.metadata, deletionTimestamp: "2026-12-01T00:00:00Z" };
    expect(containersReady(going)).toBe(false);
  });
});
