// /healthz's rule as a plain function: an election loop that stopped ticking is stuck, unless the
// sidecar ended its campaigns on purpose. A pod being deleted hands over at once and then waits
// for its SIGTERM, which for a native sidecar comes only once the application's containers have
// exited: up to their grace period, far past the stall bound.
import { describe, expect, it } from "vitest";
import type { Elector } from "../../src/election/elector.ts";
import { type HealthView, stalledReason } from "../../src/sidecar/health.ts";

const STALL_MS = 10_000;

function view(campaignEnded: boolean): HealthView {
  return {
    electors: [{ key: "orders" } as Elector],
    lastTick: new Map([["orders", 1_000]]),
    campaigningSince: 0,
    podShown: true,
    readyOnce: true,
    campaignEnded,
  };
}

describe("stalledReason", () => {
  it("calls a loop without a tick for longer than the bound stuck", () => {
    expect(stalledReason(view(false), STALL_MS, 1_000 + STALL_MS + 1)).toBe(
      `no election tick for orders in ${STALL_MS} ms`,
    );
  });

  it("does not call the loop of a sidecar that ended its campaigns (its pod being deleted) stuck", () => {
    expect(stalledReason(view(true), STALL_MS, 1_000 + 60 * STALL_MS)).toBeNull();
  });
});
