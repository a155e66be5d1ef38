// /healthz's rule as a plain function: an election loop that stopped ticking is stuck, unless the
// sidecar ended its campaigns on purpose. A pod being deleted hands over at once and then waits
// for its SIGTERM, which for a native sidecar comes only once the application's containers have
// exited: up to their grace period, far past the stall bound.
import { describe, expect, it } from "vitest";
import type { Elector } from "../../src/election/elector.ts";
import { SidecarView } from "../../src/sidecar/sidecar-view.ts";

const STALL_MS = 10_000;

function view(campaignEnded: boolean): SidecarView {
  const v = new SidecarView({ candidacyWaitMs: 15_000 });
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

// /readyz's last start condition: this process recorded as a candidate (a stopping leader picks its
// successor among the candidates), not waited for when the role is refused the table, and waited
// for at most one lease duration while the announcement keeps failing.
describe("SidecarView.notReady and the candidacy", () => {
  const WAIT_MS = 15_000;
  function started(): SidecarView {
    const v = new SidecarView({ candidacyWaitMs: WAIT_MS });
    v.opened(false);
    v.campaigning([{ key: "orders", status: () => ({ lastOutcome: "acquired" }) } as unknown as Elector], 0);
    return v;
  }

  it("waits until the pod is recorded as a candidate, then stays ready", () => {
    const v = started();
    expect(v.notReady(1_000)).toMatch(/^starting: not yet recorded as a candidate/);
    v.announced("recorded");
    expect(v.notReady(1_001)).toBeNull();
  });

  it("does not wait for a candidacy the role is refused (warned about instead)", () => {
    const v = started();
    v.announced("refused");
    expect(v.notReady(1_000)).toBeNull();
  });

  it("waits for a failing announcement at most one lease duration after the campaign began", () => {
    const v = started();
    v.announced("failed");
    expect(v.notReady(WAIT_MS - 1)).toMatch(
      /^starting: not yet recorded as a candidate \(its last try failed/,
    );
    expect(v.notReady(WAIT_MS)).toBeNull();
    // Ready once is ready: a later answer changes nothing.
    v.announced("failed");
    expect(v.notReady(WAIT_MS + 1)).toBeNull();
  });
});
