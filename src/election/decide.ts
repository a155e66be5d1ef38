// The election's decisions as pure functions: state and an observation in, the next state,
// a named outcome, a sentence (the log line and the test oracle) and the next wake-up out.
// Times are on the elector's monotonic clock; the server's clock only arrives as durations
// (ttlMs = expires_at − the server's now, measured in the same statement).
import type { ClaimAnswer, LeaseView, RenewAnswer } from "./ports.ts";
import type { Timing } from "./timing.ts";

export type Outcome =
  | "acquired"
  | "renewed"
  | "held-by-other"
  | "lost"
  | "stepped-down"
  | "released"
  | "transient-error";

export interface Term {
  fence: number;
  acquiredAt: Date;
  expiresAt: Date;
  /** Local end of leadership: send time of the last good claim/renew + its ttl − the margin. */
  deadline: number;
}

export interface Observed {
  holder: string | null;
  fence: number | null;
  expiresAt: Date | null;
  /** Local instant by which the server's expiry has certainly passed; null when unknown. */
  localExpiry: number | null;
}

export interface ElectionState {
  role: "leader" | "follower";
  term: Term | null;
  observed: Observed | null;
}

export interface Decision {
  outcome: Outcome;
  sentence: string;
  state: ElectionState;
  /** Monotonic instant of the next tick. */
  wakeAt: number;
}

export interface Context {
  key: string;
  holder: string;
  timing: Timing;
}

export type Action = "renew" | "claim" | "read";

export const initialState: ElectionState = { role: "follower", term: null, observed: null };

const seconds = (ms: number) => `${(ms / 1000).toFixed(1)}s`;

/**
 * The next renew falls on a grid of the renew interval shared by every elector of the process
 * (the monotonic clock starts with it), at most one interval after the last good claim or renew:
 * leases acquired at different moments then renew at the same instants, and the batched store
 * sends them as one statement per tick. Renewing early is always safe.
 */
export function nextRenewal(sentAt: number, renewIntervalMs: number): number {
  return (Math.floor(sentAt / renewIntervalMs) + 1) * renewIntervalMs;
}

/**
 * What the next tick does:
 * 1. a leader renews (the deadline timer handles a passed deadline);
 * 2. a follower told of a release, or knowing nothing yet, or past the observed expiry, claims;
 * 3. any other follower only reads (a failed claim is still a write), including one that lost a
 *    race without learning who won.
 */
export function nextAction(state: ElectionState, now: number, releaseAnnounced: boolean): Action {
  if (state.role === "leader") return "renew";
  if (releaseAnnounced || state.observed === null) return "claim";
  const expiry = state.observed.localExpiry;
  // Lost a race without learning the winner: look before writing again.
  if (expiry === null) return "read";
  return expiry <= now ? "claim" : "read";
}

/** After a claim sent at `sentAt` was answered at `receivedAt`. */
export function afterClaim(ctx: Context, answer: ClaimAnswer, sentAt: number, receivedAt: number): Decision {
  const { key, timing } = ctx;
  if (answer.won) {
    const term: Term = {
      fence: answer.fence,
      acquiredAt: answer.acquiredAt,
      expiresAt: answer.expiresAt,
      deadline: sentAt + answer.ttlMs - timing.safetyMarginMs,
    };
    return {
      outcome: "acquired",
      sentence: `acquired lease ${key} with fence ${answer.fence}`,
      state: { role: "leader", term, observed: null },
      wakeAt: nextRenewal(sentAt, timing.renewIntervalMs),
    };
  }
  return heldByOther(ctx, answer, receivedAt);
}

function heldByOther(
  ctx: Context,
  seen: { holder: string | null; fence: number | null; expiresAt: Date | null; ttlMs: number | null },
  receivedAt: number,
): Decision {
  const { key, timing } = ctx;
  const localExpiry = seen.ttlMs === null ? null : receivedAt + Math.max(0, seen.ttlMs);
  const observed: Observed = {
    holder: seen.holder,
    fence: seen.fence,
    expiresAt: seen.expiresAt,
    localExpiry,
  };
  const nextPoll = receivedAt + timing.retryIntervalMs;
  return {
    outcome: "held-by-other",
    sentence:
      seen.holder === null
        ? `lease ${key} was taken by another claimer at the same moment; looking again in ${seconds(timing.retryIntervalMs)}`
        : `lease ${key} is held by ${seen.holder} with fence ${seen.fence}, for another ${seconds(seen.ttlMs ?? 0)}`,
    state: { role: "follower", term: null, observed },
    // Wake at the next poll, or exactly when the observed lease runs out if that is sooner.
    wakeAt: localExpiry === null ? nextPoll : Math.min(nextPoll, localExpiry),
  };
}

/** A follower's read. Null means "claim now": the lease is free, expired, or ours already. */
export function afterRead(ctx: Context, view: LeaseView | null, receivedAt: number): Decision | null {
  if (view === null || view.ttlMs <= 0 || view.holder === ctx.holder) return null;
  return heldByOther(ctx, view, receivedAt);
}

export function afterRenew(
  ctx: Context,
  state: ElectionState,
  answer: RenewAnswer,
  sentAt: number,
  receivedAt: number,
): Decision {
  const { key, timing } = ctx;
  const term = state.term;
  if (state.role !== "leader" || term === null) throw new Error("afterRenew needs a leader's state");
  if (answer.renewed) {
    return {
      outcome: "renewed",
      sentence: `renewed lease ${key} with fence ${term.fence}, valid for ${seconds(answer.ttlMs)}`,
      state: {
        role: "leader",
        term: {
          ...term,
          expiresAt: answer.expiresAt,
          deadline: sentAt + answer.ttlMs - timing.safetyMarginMs,
        },
        observed: null,
      },
      wakeAt: nextRenewal(sentAt, timing.renewIntervalMs),
    };
  }
  return {
    outcome: "lost",
    sentence: `lost lease ${key}: the renew of fence ${term.fence} matched no row (expired or taken over)`,
    state: initialState,
    // Look at once: the answer to "who holds it now" decides when to try again.
    wakeAt: receivedAt,
  };
}

/** A store call failed or timed out. Leaders keep trying until their deadline. */
export function afterError(
  ctx: Context,
  state: ElectionState,
  action: Action,
  error: unknown,
  now: number,
): Decision {
  const { key, timing } = ctx;
  const reason = error instanceof Error ? error.message : String(error);
  if (state.role === "leader" && state.term) {
    const left = state.term.deadline - now;
    if (left <= 0) return stepDown(ctx, state, now);
    return {
      outcome: "transient-error",
      sentence: `could not ${action} lease ${key} (${reason}); retrying, leadership ends locally in ${seconds(left)}`,
      state,
      wakeAt: Math.min(now + timing.transientRetryMs, state.term.deadline),
    };
  }
  return {
    outcome: "transient-error",
    sentence: `could not ${action} lease ${key} (${reason}); retrying in ${seconds(timing.retryIntervalMs)}`,
    state,
    wakeAt: now + timing.retryIntervalMs,
  };
}

/** The local deadline passed without a successful renew. */
export function stepDown(ctx: Context, state: ElectionState, now: number): Decision {
  const fence = state.term?.fence;
  return {
    outcome: "stepped-down",
    sentence: `stepped down from lease ${ctx.key} (fence ${fence}): no successful renew before the local deadline`,
    state: initialState,
    wakeAt: now + ctx.timing.retryIntervalMs,
  };
}

export function released(ctx: Context, fence: number, ended: boolean, now: number): Decision {
  return {
    outcome: "released",
    sentence: ended
      ? `released lease ${ctx.key} (fence ${fence})`
      : `released lease ${ctx.key} (fence ${fence}); it had already ended on the server`,
    state: initialState,
    wakeAt: now,
  };
}

/** Stopping, the release itself failed: leadership ends here all the same. */
export function releaseFailed(ctx: Context, fence: number, error: unknown, now: number): Decision {
  const reason = error instanceof Error ? error.message : String(error);
  return {
    outcome: "stepped-down",
    sentence: `stopped leading lease ${ctx.key} (fence ${fence}) but could not release it (${reason}); it ends on the server at its expiry`,
    state: initialState,
    wakeAt: now,
  };
}
