// The election's decisions as pure functions: state and an observation in, the next state,
// a named outcome, a sentence (the log line and the test oracle) and the next wake-up out.
// Times are on the elector's monotonic clock; the server's clock only arrives as durations
// (ttlMs = expires_at − the server's now, measured in the same statement).
import { refuse, stepDown } from "./endings.ts";
import { provenDeadPredecessor } from "./identity.ts";
import type { ClaimAnswer, LeaseView, RenewAnswer } from "./ports.ts";
import {
  type Action,
  type Context,
  type Decision,
  type ElectionState,
  initialState,
  type Observed,
  seconds,
  type Term,
} from "./state.ts";

export * from "./endings.ts";
export * from "./state.ts";

/**
 * The next renew falls on a grid of the renew interval shared by every elector of the process
 * (the monotonic clock starts with it), at most one interval after the last good claim or renew:
 * leases acquired at different moments then renew at the same instants, and the batched store
 * sends them as one statement per tick. Renewing early is always safe.
 */
export function nextRenewal(sentAt: number, renewIntervalMs: number): number {
  return (Math.floor(sentAt / renewIntervalMs) + 1) * renewIntervalMs;
}

/** Where leadership ends locally after a claim or renew sent at `sentAt`: see Context.sessionTakeover. */
export function localDeadline(ctx: Context, sentAt: number, ttlMs: number): number {
  const { safetyMarginMs, renewIntervalMs, callTimeoutMs } = ctx.timing;
  const byLease = sentAt + ttlMs - safetyMarginMs;
  return ctx.sessionTakeover ? Math.min(byLease, sentAt + renewIntervalMs + callTimeoutMs) : byLease;
}

/** What the elector heard between two ticks. */
export interface Hints {
  /** A release notice for this key arrived since the last tick. */
  noticed: boolean;
  /** The notice feed is known healthy (Context.noticesHealthy). */
  noticesHealthy: boolean;
  /** Why this process may not lead now (its campaign gate), or null. */
  unfit: string | null;
}

const NO_HINTS: Hints = { noticed: false, noticesHealthy: false, unfit: null };

/**
 * What the next tick does:
 * 1. a leader renews (the deadline timer handles a passed deadline), or hands over when it may not
 *    lead (its campaign gate is closed);
 * 2. a follower that may not lead only reads, whatever it heard: it claims nothing;
 * 3. a follower knowing nothing yet, or told of a release, claims: the claim is conditional on the
 *    server (another holder's live lease is never taken), so a forged notice costs one claim that
 *    fails and answers who holds the lease, the same outcome as a read, one write dearer;
 * 4. a follower past the observed expiry claims when it polls (its observation is at most one
 *    retry interval old), and reads first when it waits on notices (its observation is up to a
 *    lease old, and the holder has most likely renewed since): a failed claim is still a write;
 * 5. any other follower only reads, including one that lost a race without learning who won.
 */
export function nextAction(state: ElectionState, now: number, hints: Hints = NO_HINTS): Action {
  if (state.role === "leader") return hints.unfit === null ? "renew" : "resign";
  if (hints.unfit !== null) return "read";
  if (state.observed === null || hints.noticed) return "claim";
  const expiry = state.observed.localExpiry;
  // Lost a race without learning the winner: look before writing again.
  if (expiry === null) return "read";
  return expiry <= now && !hints.noticesHealthy ? "claim" : "read";
}

/**
 * After a claim sent at `sentAt` was answered at `receivedAt`. `handedOut` is the highest fence
 * this elector ever gave to leader work (0 for none). A won claim is refused when:
 * 1. it was answered at or after the local deadline it would set (a blocked event loop, a clock
 *    that moved past it): nothing received after a deadline counts;
 * 2. its fence is not higher than one already handed out: every lead() gets a fresh fence.
 * A refused term is released at once; the elector claims again after a short pause.
 */
export function afterClaim(
  ctx: Context,
  answer: ClaimAnswer,
  sentAt: number,
  receivedAt: number,
  handedOut: number,
): Decision {
  const { key, timing } = ctx;
  if (!answer.won) return heldByOther(ctx, answer, receivedAt);
  const deadline = localDeadline(ctx, sentAt, answer.ttlMs);
  if (receivedAt >= deadline) {
    return refuse(
      ctx,
      answer.fence,
      `won lease ${key} with fence ${answer.fence} but the answer came ${seconds(receivedAt - deadline)} after the local deadline it would set; releasing it`,
      receivedAt,
    );
  }
  if (answer.fence <= handedOut) {
    return refuse(
      ctx,
      answer.fence,
      `refused fence ${answer.fence} of lease ${key}: not higher than fence ${handedOut} already handed to leader work; releasing it to claim a fresh one`,
      receivedAt,
    );
  }
  const term: Term = {
    fence: answer.fence,
    acquiredAt: answer.acquiredAt,
    expiresAt: answer.expiresAt,
    deadline,
  };
  return {
    outcome: "acquired",
    sentence: `acquired lease ${key} with fence ${answer.fence}`,
    state: { role: "leader", term, observed: null },
    wakeAt: nextRenewal(sentAt, timing.renewIntervalMs),
    ...(answer.change ? { change: answer.change } : {}),
  };
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
  // Notices heard: the next look is at the observed expiry (a release wakes the follower sooner).
  // A notice lost on a connection that still looked healthy costs at most this one expiry.
  const wakeAt =
    localExpiry === null ? nextPoll : ctx.noticesHealthy ? localExpiry : Math.min(nextPoll, localExpiry);
  return {
    outcome: "held-by-other",
    sentence:
      seen.holder === null
        ? `lease ${key} was taken by another claimer at the same moment; looking again in ${seconds(timing.retryIntervalMs)}`
        : `lease ${key} is held by ${seen.holder} with fence ${seen.fence}, for another ${seconds(seen.ttlMs ?? 0)}`,
    state: { role: "follower", term: null, observed },
    // Polling: wake at the next poll, or exactly when the observed lease runs out if that is sooner.
    wakeAt,
  };
}

/**
 * A follower's read. Null means "claim now": the lease is free, expired, held in this holder's
 * name by a claim whose answer never arrived (settled before this read, see the elector), or held
 * by a predecessor this process has proven dead (same restart lock); the claim that follows wins
 * a term of its own, and only its answer can start work. A follower that may not lead (`unfit`)
 * claims nothing: it only notes who leads.
 */
export function afterRead(
  ctx: Context,
  view: LeaseView | null,
  receivedAt: number,
  unfit: string | null = null,
): Decision | null {
  if (unfit !== null) return notCampaigning(ctx, view, receivedAt, unfit);
  if (view === null || view.ttlMs <= 0 || view.holder === ctx.holder) return null;
  // Proven over: the same restart lock (its holder died), or its recorded server session is gone.
  if (provenDeadPredecessor(ctx.holder, view.holder) || view.sessionGone) return null;
  return heldByOther(ctx, view, receivedAt);
}

function notCampaigning(ctx: Context, view: LeaseView | null, receivedAt: number, unfit: string): Decision {
  const live = view !== null && view.ttlMs > 0;
  const seen = live ? view : { holder: null, fence: view?.fence ?? null, expiresAt: null, ttlMs: null };
  const watched = heldByOther(ctx, seen, receivedAt);
  const who = live ? `held by ${view.holder} with fence ${view.fence}` : "free";
  // It looks again when a follower would: the gate opening triggers a look of its own.
  return {
    ...watched,
    outcome: "not-campaigning",
    sentence: `not campaigning for lease ${ctx.key} (${who}): ${unfit}`,
  };
}

/**
 * After a renew sent at `sentAt` was answered at `receivedAt`:
 * 1. zero rows: the term is lost, at once (also while stopping);
 * 2. answered at or after the local deadline (the current one, or the one it would set): the
 *    answer counts for nothing and the leader steps down;
 * 3. otherwise the deadline moves to this renew's send time + its ttl − the margin.
 */
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
  if (!answer.renewed) {
    return {
      outcome: "lost",
      sentence: `lost lease ${key}: the renew of fence ${term.fence} matched no row (expired or taken over)`,
      state: initialState,
      // Look at once: the answer to "who holds it now" decides when to try again.
      wakeAt: receivedAt,
    };
  }
  const deadline = localDeadline(ctx, sentAt, answer.ttlMs);
  if (receivedAt >= Math.min(term.deadline, deadline)) {
    return stepDown(ctx, state, receivedAt, "the renew was answered only after the local deadline");
  }
  return {
    outcome: "renewed",
    sentence: `renewed lease ${key} with fence ${term.fence}, valid for ${seconds(answer.ttlMs)}`,
    state: {
      role: "leader",
      term: { ...term, expiresAt: answer.expiresAt, deadline },
      observed: null,
    },
    wakeAt: nextRenewal(sentAt, timing.renewIntervalMs),
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
