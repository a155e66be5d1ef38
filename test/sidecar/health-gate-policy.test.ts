// The health gate's rules alone, on a manual clock: what it answers a leader and a follower as the
// application's readiness changes, when it hands over, and the settle period after a handover.
import { describe, expect, it } from "vitest";
import { HealthGate, type HealthPolicy } from "../../src/sidecar/health-gate.ts";
import { ManualClock } from "../support/manual-clock.ts";

const policy: HealthPolicy = { graceMs: 5_000, settleMs: 30_000, strict: false, waitAtStart: true };
const READY = { ready: true, detail: "app ready" };
const UNREADY = { ready: false, detail: "container app not ready" };

function setup(
  options: Partial<HealthPolicy> = {},
  candidate: () => Promise<string | null> = async () => "pod-b",
) {
  const clock = new ManualClock();
  const lines: string[] = [];
  let leading = true;
  let changes = 0;
  const gate = new HealthGate(
    { ...policy, ...options },
    {
      clock,
      leadsAny: () => leading,
      healthyCandidate: candidate,
      log: (line) => lines.push(line),
    },
  );
  const asLeader = gate.gateFor(() => leading);
  asLeader.subscribe(() => changes++);
  return {
    clock,
    gate,
    lines,
    reason: () => asLeader.reasonNotToLead(),
    lead: (l: boolean) => {
      leading = l;
    },
    changes: () => changes,
  };
}

/** Lets the candidate lookup (a promise) settle. */
const settle = () => new Promise((resolve) => setImmediate(resolve));

describe("the health gate", () => {
  it("waits for the first report at start, unless told not to", () => {
    expect(setup().reason()).toBe("application not ready yet (no report from the application yet)");
    expect(setup({ waitAtStart: false }).reason()).toBeNull();
  });

  it("keeps a leader through the grace period, then hands over once a healthy candidate is seen", async () => {
    const t = setup();
    t.gate.report(READY);
    t.gate.report(UNREADY);
    expect(t.reason()).toBeNull();
    t.clock.advance(4_999);
    await settle();
    expect(t.reason()).toBeNull();
    const before = t.changes();
    t.clock.advance(1);
    await settle();
    expect(t.reason()).toBe("application unready for more than 5.0s (container app not ready)");
    expect(t.changes()).toBe(before + 1); // the elector is woken to hand over at once
    expect(t.lines).toEqual(["application unready for 5.0s: handing over, pod-b is a healthy candidate"]);
    expect(t.gate.view()).toMatchObject({ ready: false, handingOver: true, handovers: 1 });
  });

  it("shows handingOver only while this pod still leads: a completed handover is over", async () => {
    const t = setup();
    t.gate.report(READY);
    t.gate.report(UNREADY);
    t.clock.advance(5_000);
    await settle();
    expect(t.gate.view()).toMatchObject({ handingOver: true, handovers: 1 });
    t.lead(false); // the lease is released: the handover is done, the application still unready
    t.clock.advance(60_000);
    expect(t.gate.view()).toMatchObject({ ready: false, handingOver: false, handovers: 1 });
    expect(t.reason()).toBe("application unready (container app not ready)");
  });

  it("a follower whose application is unready does not campaign, at once", () => {
    const t = setup();
    t.lead(false);
    t.gate.report(UNREADY);
    expect(t.reason()).toBe("application unready (container app not ready)");
  });

  it("keeps the lease while no candidate is healthy or the peers cannot be listed, looking again each grace period", async () => {
    let answer: () => Promise<string | null> = async () => null;
    const t = setup({}, () => answer());
    t.gate.report(UNREADY);
    t.clock.advance(5_000);
    await settle();
    expect(t.reason()).toBeNull();
    answer = async () => {
      throw new Error("503 from the API server");
    };
    t.clock.advance(5_000);
    await settle();
    expect(t.reason()).toBeNull();
    expect(t.lines).toEqual([
      "application unready for 5.0s, keeping the lease: no peer pod has a ready application; looking again in 5.0s",
      "application unready for 5.0s, keeping the lease: the peers could not be listed (503 from the API server); looking again in 5.0s",
    ]);
    answer = async () => "pod-c";
    t.clock.advance(5_000);
    await settle();
    expect(t.reason()).toMatch(/^application unready for more than 5\.0s/);
  });

  it("in strict mode hands over without a candidate", async () => {
    const t = setup({ strict: true }, async () => null);
    t.gate.report(UNREADY);
    t.clock.advance(5_000);
    await settle();
    expect(t.reason()).toMatch(/^application unready for more than 5\.0s/);
    expect(t.lines).toEqual([
      "application unready for 5.0s: handing over (strict: no peer pod has a ready application)",
    ]);
  });

  it("after a health handover, campaigns again only once the application has been ready for the settle period", async () => {
    const t = setup();
    t.gate.report(UNREADY);
    t.clock.advance(5_000);
    await settle();
    t.lead(false);
    t.gate.report(READY);
    expect(t.reason()).toBe(
      "application ready for less than the 30.0s settle period after a health handover",
    );
    t.gate.report(UNREADY); // flapping: the settle period starts again from the next ready
    t.gate.report(READY);
    t.clock.advance(29_999);
    expect(t.reason()).not.toBeNull();
    t.clock.advance(1);
    expect(t.reason()).toBeNull();
  });

  it("an application that recovers within the grace period changes nothing", async () => {
    const t = setup();
    t.gate.report(UNREADY);
    t.clock.advance(3_000);
    t.gate.report(READY);
    t.clock.advance(10_000);
    await settle();
    expect(t.reason()).toBeNull();
    expect(t.lines).toEqual([]);
    expect(t.gate.view().handovers).toBe(0);
  });

  it("arms nothing once stopped: a late report or peer list keeps no process alive", async () => {
    let answer = (_: string | null) => {};
    const t = setup({}, () => new Promise((resolve) => (answer = resolve)));
    t.gate.report(UNREADY);
    t.clock.advance(5_000); // the peer list is out
    t.gate.stop();
    answer(null);
    await settle();
    t.gate.report(READY);
    t.gate.report(UNREADY);
    expect(t.clock.pendingTimers()).toBe(0);
  });

  it("does not count a handover when leadership ended while the peers were listed", async () => {
    let answer = (_: string | null) => {};
    const t = setup({}, () => new Promise((resolve) => (answer = resolve)));
    t.gate.report(UNREADY);
    t.clock.advance(5_000);
    t.lead(false); // the term was lost meanwhile
    answer("pod-b");
    await settle();
    expect(t.gate.view()).toMatchObject({ handingOver: false, handovers: 0 });
    t.gate.report(READY);
    expect(t.reason()).toBeNull(); // no settle period for a handover that never happened
  });
});
