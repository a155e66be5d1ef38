// The decision functions alone: an injected clock (plain numbers), no database, no sleeping.
import { describe, expect, it } from "vitest";
import {
  afterClaim,
  afterError,
  afterRead,
  afterRenew,
  type Context,
  type Decision,
  type ElectionState,
  initialState,
  localDeadline,
  nextAction,
  stepDown,
} from "../../src/election/decide.ts";
import { resolveTiming, timingOrThrow } from "../../src/election/timing.ts";

const timing = timingOrThrow({ leaseDurationMs: 15_000 });
const ctx: Context = { key: "orders-sync", holder: "me", timing };
const at = (ms: number) => new Date(1_800_000_000_000 + ms);
const won = (fence: number, ttlMs = 15_000) =>
  ({ won: true, fence, acquiredAt: at(0), expiresAt: at(ttlMs), ttlMs }) as const;
const lostTo = (holder: string, fence: number, ttlMs: number) =>
  ({ won: false, holder, fence, expiresAt: at(ttlMs), ttlMs }) as const;

describe("timing", () => {
  it("defaults to 15 s lease, renew every 5 s, retry 2 s, margin one renew interval", () => {
    expect(timing).toMatchObject({
      leaseDurationMs: 15_000,
      renewIntervalMs: 5_000,
      retryIntervalMs: 2_000,
      safetyMarginMs: 5_000,
    });
    expect(timing.callTimeoutMs).toBeLessThanOrEqual(timing.renewIntervalMs / 2);
  });

  it("rejects inconsistent settings, every problem at once, never adjusting", () => {
    const { problems } = resolveTiming({
      leaseDurationMs: 10_000,
      renewIntervalMs: 10_000,
      retryIntervalMs: 0,
    });
    expect(problems).toEqual([expect.stringMatching(/retryIntervalMs must be a positive/)]);
    const second = resolveTiming({ leaseDurationMs: 10_000, renewIntervalMs: 12_000, callTimeoutMs: 9_000 });
    expect(second.problems).toEqual([
      expect.stringMatching(/renewIntervalMs \(12000 ms\) must be shorter than leaseDurationMs/),
      expect.stringMatching(/renewIntervalMs \+ safetyMarginMs/),
      expect.stringMatching(/callTimeoutMs \(9000 ms\) must be at most half/),
    ]);
    expect(() => timingOrThrow({ renewIntervalMs: 0 })).toThrow(/renewIntervalMs must be a positive/);
  });
});

describe("a follower", () => {
  it("claims when it knows nothing, reads while a live lease is observed, claims at its expiry", () => {
    expect(nextAction(initialState, 0)).toBe("claim");
    const held = afterClaim(ctx, lostTo("other", 7, 9_000), 100, 110, 0);
    expect(held.outcome).toBe("held-by-other");
    expect(held.sentence).toBe("lease orders-sync is held by other with fence 7, for another 9.0s");
    expect(held.wakeAt).toBe(110 + timing.retryIntervalMs);
    expect(nextAction(held.state, 2_110)).toBe("read");
    // Exactly at the observed expiry (measured from when the answer arrived), it claims.
    expect(nextAction(held.state, 9_109)).toBe("read");
    expect(nextAction(held.state, 9_110)).toBe("claim");
  });

  it("wakes exactly at the observed expiry when that comes before the next poll", () => {
    const held = afterClaim(ctx, lostTo("other", 7, 500), 0, 20, 0);
    expect(held.wakeAt).toBe(520);
  });

  it("reads before claiming again after losing a race without learning the winner", () => {
    const raced = afterClaim(
      ctx,
      { won: false, holder: null, fence: null, expiresAt: null, ttlMs: null },
      0,
      1,
      0,
    );
    expect(raced.wakeAt).toBe(1 + timing.retryIntervalMs);
    expect(nextAction(raced.state, raced.wakeAt)).toBe("read");
  });

  it("claims when told of a release (the claim is conditional on the server), and reads otherwise", () => {
    const held = afterClaim(ctx, lostTo("other", 7, 9_000), 0, 0, 0);
    expect(nextAction(held.state, 1)).toBe("read");
    expect(nextAction(held.state, 1, { noticed: true, noticesHealthy: true, unfit: null })).toBe("claim");
  });

  it("claims nothing while its campaign gate is closed, whatever it heard, and says why after a read", () => {
    const unfit = { noticed: true, noticesHealthy: false, unfit: "application unready" };
    expect(nextAction(initialState, 0, unfit)).toBe("read");
    const held = afterClaim(ctx, lostTo("other", 7, 9_000), 0, 0, 0);
    expect(nextAction(held.state, 9_001, unfit)).toBe("read");
    const free = afterRead(ctx, null, 100, "application unready");
    expect(free).toMatchObject({ outcome: "not-campaigning", state: { role: "follower" } });
    expect(free?.sentence).toBe("not campaigning for lease orders-sync (free): application unready");
    expect(free?.wakeAt).toBe(100 + timing.retryIntervalMs);
  });

  it("claims in the same tick when a read finds the lease free, expired or its own", () => {
    const view = {
      key: "orders-sync",
      holder: "other",
      fence: 3,
      acquiredAt: at(0),
      expiresAt: at(1),
      ttlMs: 1,
    };
    expect(afterRead(ctx, null, 0)).toBeNull();
    expect(afterRead(ctx, { ...view, ttlMs: 0 }, 0)).toBeNull();
    expect(afterRead(ctx, { ...view, holder: "me" }, 0)).toBeNull();
    expect(afterRead(ctx, view, 0)?.outcome).toBe("held-by-other");
  });

  it("under session takeover, claims from a holder whose session is gone and ends its own terms a renew interval plus a call timeout after the renew", () => {
    const view = { key: "k", holder: "other", fence: 3, acquiredAt: at(0), expiresAt: at(9), ttlMs: 9_000 };
    expect(afterRead(ctx, { ...view, sessionGone: true }, 0)).toBeNull();
    // timing: lease 15 s, renew 5 s, margin 5 s, call timeout 2.5 s.
    expect(localDeadline(ctx, 1_000, 15_000)).toBe(11_000);
    expect(localDeadline({ ...ctx, sessionTakeover: true }, 1_000, 15_000)).toBe(8_500);
    // A ttl shorter than that bound still wins.
    expect(localDeadline({ ...ctx, sessionTakeover: true }, 1_000, 9_000)).toBe(5_000);
  });

  it("claims at once from a predecessor proven dead by the same restart lock, and only from it", () => {
    const lock = "0123456789abcdef0123456789abcdef";
    const self: Context = { ...ctx, holder: `me-2#r:${lock}.20` };
    const view = {
      key: "k",
      holder: `me-1#r:${lock}.10`,
      fence: 3,
      acquiredAt: at(0),
      expiresAt: at(9),
      ttlMs: 9_000,
    };
    expect(afterRead(self, view, 0)).toBeNull();
    expect(afterRead(self, { ...view, holder: `other#r:${"f".repeat(32)}.10` }, 0)?.outcome).toBe(
      "held-by-other",
    );
    expect(afterRead(self, { ...view, holder: "me-1" }, 0)?.outcome).toBe("held-by-other");
    // The same lock bound later is a live successor, not a dead predecessor.
    expect(afterRead(self, { ...view, holder: `me-3#r:${lock}.30` }, 0)?.outcome).toBe("held-by-other");
    // Without a proof of its own, a process proves nothing.
    expect(afterRead(ctx, view, 0)?.outcome).toBe("held-by-other");
  });

  it("retries at the retry interval after a transient error", () => {
    const d = afterError(ctx, initialState, "read", new Error("connection refused"), 1_000);
    expect(d).toMatchObject({ outcome: "transient-error", wakeAt: 3_000 });
    expect(d.sentence).toBe("could not read lease orders-sync (connection refused); retrying in 2.0s");
  });
});

describe("a leader", () => {
  const lead = (sentAt: number): Decision => afterClaim(ctx, won(42), sentAt, sentAt + 5, 0);

  it("sets its local deadline from the send time, the server's ttl and the margin", () => {
    const d = lead(1_000);
    expect(d.outcome).toBe("acquired");
    expect(d.sentence).toBe("acquired lease orders-sync with fence 42");
    expect(d.state.term?.deadline).toBe(1_000 + 15_000 - 5_000);
    // On the process-wide renew grid: at most one interval later, shared with every other lease.
    expect(d.wakeAt).toBe(5_000);
    expect(nextAction(d.state, 5_000)).toBe("renew");
  });

  it("renews leases acquired at different moments at the same instants", () => {
    const wakes = [0, 1_234, 4_999, 5_000, 7_777].map((t) => afterClaim(ctx, won(1), t, t + 3, 0).wakeAt);
    expect(wakes).toEqual([5_000, 5_000, 5_000, 10_000, 10_000]);
  });

  it("moves the deadline on each renew and treats zero rows as a definitive loss", () => {
    const leading = lead(0).state;
    const renewed = afterRenew(
      ctx,
      leading,
      { renewed: true, expiresAt: at(20_000), ttlMs: 14_990 },
      5_000,
      5_004,
    );
    expect(renewed.outcome).toBe("renewed");
    expect(renewed.state.term?.deadline).toBe(5_000 + 14_990 - 5_000);
    const lost = afterRenew(ctx, renewed.state, { renewed: false }, 10_000, 10_003);
    expect(lost).toMatchObject({ outcome: "lost", state: initialState, wakeAt: 10_003 });
    expect(lost.sentence).toBe(
      "lost lease orders-sync: the renew of fence 42 matched no row (expired or taken over)",
    );
  });

  it("retries transient failures quickly, but never past its deadline", () => {
    const leading = lead(0).state;
    const first = afterError(ctx, leading, "renew", new Error("timeout"), 5_000);
    expect(first).toMatchObject({ outcome: "transient-error", wakeAt: 5_000 + timing.transientRetryMs });
    expect(first.state.role).toBe("leader");
    const late = afterError(ctx, leading, "renew", new Error("timeout"), 9_900);
    expect(late.wakeAt).toBe(10_000);
    expect(afterError(ctx, leading, "renew", new Error("timeout"), 10_000).outcome).toBe("stepped-down");
  });

  it("walks through a whole outage as a sequence of outcomes", () => {
    const outcomes: string[] = [];
    let state: ElectionState = initialState;
    const step = (d: Decision) => {
      outcomes.push(d.outcome);
      state = d.state;
    };
    step(afterClaim(ctx, won(1), 0, 2, 0));
    step(afterRenew(ctx, state, { renewed: true, expiresAt: at(20_000), ttlMs: 15_000 }, 5_000, 5_002));
    step(afterError(ctx, state, "renew", new Error("down"), 10_000));
    step(afterError(ctx, state, "renew", new Error("down"), 11_000));
    step(stepDown(ctx, state, 15_000));
    step(afterClaim(ctx, lostTo("other", 2, 14_000), 17_000, 17_001, 1));
    step(afterClaim(ctx, won(3), 31_001, 31_003, 1));
    expect(outcomes).toEqual([
      "acquired",
      "renewed",
      "transient-error",
      "transient-error",
      "stepped-down",
      "held-by-other",
      "acquired",
    ]);
  });
});

describe("a leader whose campaign gate closed", () => {
  it("hands over instead of renewing", () => {
    const d = afterClaim(ctx, won(4), 0, 10, 0);
    expect(nextAction(d.state, 5_000, { noticed: false, noticesHealthy: false, unfit: "draining" })).toBe(
      "resign",
    );
    expect(nextAction(d.state, 5_000)).toBe("renew");
  });
});

describe("answers that cannot start a term", () => {
  it("refuses a claim answered at or after the deadline it would set, and asks for its release", () => {
    // Sent at 0 with a 15 s ttl: the local deadline would be 10 s.
    const late = afterClaim(ctx, won(8), 0, 10_000, 0);
    expect(late).toMatchObject({ outcome: "refused", state: initialState, release: 8 });
    expect(late.sentence).toBe(
      "won lease orders-sync with fence 8 but the answer came 0.0s after the local deadline it would set; releasing it",
    );
    expect(afterClaim(ctx, won(8), 0, 9_999, 0).outcome).toBe("acquired");
  });

  it("refuses a fence that is not higher than one already handed to leader work", () => {
    const again = afterClaim(ctx, won(5), 0, 3, 5);
    expect(again).toMatchObject({ outcome: "refused", release: 5, wakeAt: 3 + timing.transientRetryMs });
    expect(again.sentence).toBe(
      "refused fence 5 of lease orders-sync: not higher than fence 5 already handed to leader work; releasing it to claim a fresh one",
    );
    expect(afterClaim(ctx, won(6), 0, 3, 5).outcome).toBe("acquired");
  });

  it("steps down on a renew answered after the current deadline, or after the one it would set", () => {
    const leading = afterClaim(ctx, won(4), 0, 1, 0).state; // deadline 10 s
    const renewed = { renewed: true, expiresAt: at(20_000), ttlMs: 15_000 } as const;
    const late = afterRenew(ctx, leading, renewed, 5_000, 10_000);
    expect(late).toMatchObject({ outcome: "stepped-down", state: initialState });
    expect(late.sentence).toBe(
      "stepped down from lease orders-sync (fence 4): the renew was answered only after the local deadline",
    );
    // A renew that shortens the lease below the margin (ttl 3 s) is past its own deadline (5 + 3 − 5 s) on arrival.
    const short = { renewed: true, expiresAt: at(8_000), ttlMs: 3_000 } as const;
    expect(afterRenew(ctx, leading, short, 5_000, 5_002).outcome).toBe("stepped-down");
    // A loss is a loss, late or not.
    expect(afterRenew(ctx, leading, { renewed: false }, 5_000, 12_000).outcome).toBe("lost");
  });
});
