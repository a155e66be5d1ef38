// The campaign gate on real PostgreSQL: a follower whose gate is closed claims nothing, not even a
// free lease; opening the gate claims at once; a leader whose gate closes hands over as stop()
// does (work ended first, then beforeRelease, then the release) and stays out until it opens.
import { describe, expect, it } from "vitest";
import { CampaignSwitch } from "../../src/election/campaign-gate.ts";
import type { LeaderTerm } from "../../src/election/elector.ts";
import { electorHarness, settle, until } from "../support/election/elector-harness.ts";
import { HoldingStore } from "../support/election/holding-store.ts";
import { ManualClock } from "../support/manual-clock.ts";

const h = electorHarness();

describe("a follower whose gate is closed", () => {
  it("never claims a free lease, says why, and claims at once when the gate opens", async () => {
    const clock = new ManualClock();
    const gate = new CampaignSwitch("application unready");
    const held = new HoldingStore(h.store);
    const a = h.elector(clock, { key: "gate-follower", holder: "a", store: held, campaign: gate });
    a.e.start();
    for (let i = 0; i < 5; i++) {
      await until(clock, () => a.ticks.length === i + 1, `look ${i + 1}`);
      clock.advance(2_000);
    }
    expect(held.calls.claim).toBe(0);
    expect(a.outcomes().every((o) => o === "not-campaigning")).toBe(true);
    expect(a.ticks[0]?.sentence).toBe("not campaigning for lease gate-follower (free): application unready");
    expect(a.e.status()).toMatchObject({ role: "follower", notCampaigning: "application unready" });
    expect(await h.store.read("gate-follower")).toBeNull();

    const looks = a.ticks.length;
    gate.fit();
    // No time passes: opening the gate is itself the wake-up.
    await until(clock, () => a.e.isLeader(), "claims as soon as the gate opens");
    expect(a.ticks.length).toBe(looks + 1);
    expect(a.e.status().notCampaigning).toBeNull();
  });

  it("reads instead of claiming on a lease held by another, and names the holder", async () => {
    const clock = new ManualClock();
    const b = await h.store.claim("gate-held", "b", 15_000);
    const a = h.elector(clock, { key: "gate-held", holder: "a", campaign: new CampaignSwitch("draining") });
    a.e.start();
    await until(clock, () => a.ticks.length === 1, "first look");
    expect(a.ticks[0]).toMatchObject({ action: "read", outcome: "not-campaigning" });
    expect(a.ticks[0]?.sentence).toBe(
      `not campaigning for lease gate-held (held by b with fence ${b.fence}): draining`,
    );
    expect(a.e.status()).toMatchObject({ leader: "b", leaderFence: b.fence });
  });
});

describe("a leader whose gate closes", () => {
  it("ends its work, runs beforeRelease while still holding the row, releases, and stays out", async () => {
    const clock = new ManualClock();
    const gate = new CampaignSwitch();
    const steps: string[] = [];
    const terms: LeaderTerm[] = [];
    const held = new HoldingStore(h.store);
    const a = h.elector(clock, {
      key: "gate-leader",
      holder: "a",
      store: held,
      campaign: gate,
      lead: (t) => {
        terms.push(t);
        t.signal.addEventListener("abort", () => steps.push("work aborted"));
      },
      beforeRelease: async ({ fence }) => {
        const row = await h.store.read("gate-leader");
        steps.push(`beforeRelease: row held by ${row?.holder} with fence ${row?.fence} (term ${fence})`);
      },
    });
    a.e.start();
    await until(clock, () => a.e.isLeader(), "acquire");
    const fence = terms[0]?.fence;

    gate.unfit("application unready");
    await until(
      clock,
      () => a.outcomes().includes("resigned"),
      "hands over as the gate closes, no time passing",
    );
    await settle(() => held.answers.release === 1, "the release answered");
    expect((await h.store.read("gate-leader"))?.ttlMs).toBeLessThanOrEqual(0);
    expect(steps).toEqual([
      "work aborted",
      `beforeRelease: row held by a with fence ${fence} (term ${fence})`,
    ]);
    expect(a.transitions.map((t) => t.outcome)).toEqual(["acquired", "resigned"]);
    expect(a.transitions[1]?.sentence).toBe(
      `handed over lease gate-leader (fence ${fence}): application unready`,
    );
    expect(a.e.isLeader()).toBe(false);

    // Free on the server, and it stays out while the gate is closed.
    for (let i = 0; i < 5; i++) {
      clock.advance(2_000);
      await until(clock, () => a.ticks.at(-1)?.outcome === "not-campaigning", `look ${i + 1}`);
    }
    expect(terms).toHaveLength(1);
    const other = await h.store.claim("gate-leader", "b", 15_000);
    expect(other).toMatchObject({ won: true });
    expect(other.won && other.fence).toBeGreaterThan(fence ?? Number.NaN);
  });
});
