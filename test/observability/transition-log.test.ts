// The fields of transition lines through one elector's life: its own claims carry the history's
// reason; the ends of its terms keep the fence the report itself no longer holds.
import { expect, it } from "vitest";
import type { TickReport } from "../../src/election/elector.ts";
import { transitionFields } from "../../src/observability/transition-log.ts";

const at = new Date(0);
const term = (fence: number) => ({ fence, acquiredAt: at, expiresAt: at, deadline: 1 });
const tick = (t: Partial<TickReport> & Pick<TickReport, "outcome" | "state">): TickReport => ({
  key: "k",
  action: "claim",
  durationMs: 1,
  sentence: t.outcome,
  wakeAt: 0,
  ...t,
});
const follower = (holder: string | null, fence: number | null) => ({
  role: "follower" as const,
  term: null,
  observed: { holder, fence, expiresAt: at, localExpiry: 1 },
});
const leader = (fence: number) => ({ role: "leader" as const, term: term(fence), observed: null });
const none = { role: "follower" as const, term: null, observed: null };

it("names heldBy (who holds after it), previous holder, fence and reason for every transition", () => {
  const fields = transitionFields("me");
  const lines = [
    tick({ outcome: "held-by-other", state: follower("other", 4) }),
    tick({
      outcome: "acquired",
      state: leader(5),
      change: { reason: "expiry-takeover", previousHolder: "other" },
    }),
    tick({ outcome: "lost", action: "renew", state: none }),
    tick({ outcome: "acquired", state: leader(7), change: { reason: "claim", previousHolder: null } }),
    tick({ outcome: "stepped-down", action: "deadline", state: none }),
    tick({ outcome: "refused", state: none, release: 9 }),
    tick({ outcome: "acquired", state: leader(10), change: { reason: "new-term", previousHolder: "me" } }),
    tick({ outcome: "released", action: "release", state: none }),
  ].map((t) => {
    const { key, lease, outcome, ...rest } = fields(t);
    expect([key, lease]).toEqual(["k", "k"]);
    return rest;
  });
  expect(lines).toEqual([
    { fence: 4, heldBy: "other", previous_holder: null, reason: "held-by-other" },
    { fence: 5, heldBy: "me", previous_holder: "other", reason: "expiry-takeover" },
    { fence: 5, heldBy: null, previous_holder: "me", reason: "lost" },
    { fence: 7, heldBy: "me", previous_holder: null, reason: "claim" },
    { fence: 7, heldBy: null, previous_holder: "me", reason: "stepped-down" },
    { fence: 9, heldBy: null, previous_holder: "me", reason: "refused" },
    { fence: 10, heldBy: "me", previous_holder: "me", reason: "new-term" },
    { fence: 10, heldBy: null, previous_holder: "me", reason: "release" },
  ]);
});
