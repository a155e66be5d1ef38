// /healthz's rule as a plain function: an election loop that stopped ticking is stuck, unless the
// sidecar ended its campaigns on purpose. A pod being deleted hands over at once and then waits
// for its SIGTERM, which for a native sidecar comes only once the application's containers have
// exited: up to their grace period, far past the stall bound.
import { describe, expect, it } from "vitest";
import type { Elector } from "../../src/election/elector.ts";
import { SidecarView } from "../../src/sidecar/sidecar-view.ts";

const STALL_MS = 10_000;

function view(campaignEnded: boolean): SidecarView {
  const v = new SidecarView();
  v.campaigning([{ key: "orders" } as Elector], 0);
  v.ticked("orders", 1_000);
  if (campaignEnded) v.campaignEnded();
  return v;
}

describe("SidecarView.stalled", () => {
  it("calls a loop without a tick for longer than the bound stuck", () => {
    expect(view(false).stalled(STALL_MS, 1_000 + STALL_MS + 1)).toBe(
      `no election tick for orders in ${STALL_MS} ms`,
    );
  });

  it("does not call the loop of a sidecar that ended its campaigns (its pod being deleted) stuck", () => {
    expect(view(true).stalled(STALL_MS, 1_000 + 60 * STALL_MS)).toBeNull();
  });
});
