// The election's decisions as pure functions: state and an observation in, the next state,
// a named outcome, a sentence (the log line and the test oracle) and the next wake-up out.
// Times are on the elector's monotonic clock; the server's clock only arrives as durations
// (ttlMs = expires_at − the server's now, measured in the same statement). Nothing here reads a
// clock, starts a timer or calls a store: the elector (elector.ts) does, and applies what these say.
import { provenDeadPredecessor } from "./identity.ts";
import type { ClaimAnswer, LeaseView, RenewAnswer } from "./ports.ts";
import type { ResolvedTiming } from "./timing.ts";

export type Outcome =
  | "acquired"
  | "renewed"
  | "held-by-other"
  | "lost"
  | "stepped-down"
  | "released"
  /** A leader whose campaign gate closed handed its term over: work ended, pod demoted, released. */
  | "resigned"
  /** A follower whose campaign gate is closed looked and did not claim. */
  | "not-campaigning"
  /** A claim won a term this elector will not lead (answered too late, stale fence, stopping); it releases it. */
  | "refused"
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
  /** The fence of a term won but refused: the elector releases that term (scoped to its fence). */
  release?: number;
  /** On a won claim, how the lease changed hands, in the history table's words (when the store says). */
  change?: { reason: string; previousHolder: string | null };
}

export interface Context {
  key: string;
  holder: string;
  timing: ResolvedTiming;
  /**
   * Session takeover: this holder's term may be taken once its server session is gone, which its
   * last renew proved alive only then; leadership then ends locally one renew interval plus one
   * call timeout after that renew was sent, whatever the lease's ttl.
   */
  sessionTakeover?: boolean;
  /**
   * Release notices are known to arrive (the feed's connection is up and answered its last check):
   * a follower then waits for a notice or the observed expiry instead of polling.
   */
  noticesHealthy?: boolean;
}

export type Action = "renew" | "claim" | "read" | "resign";

export const initialState: ElectionState = { role: "follower", term: null, observed: null };

export const seconds = (ms: number) => `${(ms / 1000).toFixed(1)}s`;

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

// How a term ends, or a won term is refused: each a Decision whose sentence is the log line and
// the test oracle. A refused term is one this elector won but will not lead; it releases it.
/** Leadership ends locally: by default because the deadline passed without a successful renew. */
export function stepDown(
  ctx: Context,
  state: ElectionState,
  now: number,
  why = "no successful renew before the local deadline",
): Decision {
  const fence = state.term?.fence;
  return {
    outcome: "stepped-down",
    sentence: `stepped down from lease ${ctx.key} (fence ${fence}): ${why}`,
    state: initialState,
    wakeAt: now + ctx.timing.retryIntervalMs,
  };
}

/**
 * Session takeover: this process gave up the notice session its term recorded. A follower may
 * take the term as soon as the server no longer lists that session, so leadership ends here,
 * before the feed closes the connection (release-feed.ts, #abandon, says why that is in time).
 */
export function sessionLost(ctx: Context, state: ElectionState, now: number): Decision {
  return stepDown(
    ctx,
    state,
    now,
    "its notice session, recorded with the term, was dropped (a follower may take the term once the server ends it)",
  );
}

/** Session takeover: a claim won a term recording a notice session given up while the claim was out. */
export function wonOnLostSession(ctx: Context, fence: number, now: number): Decision {
  return refuse(
    ctx,
    fence,
    `won lease ${ctx.key} with fence ${fence} on a notice session dropped while the claim was out; releasing it`,
    now,
  );
}

/**
 * The database server's clock moved forward against the local clock by more than the margin:
 * the term may have been shorter on the server than this process believed, so it ends here.
 * A backward step lengthens the lease on the server and ends nothing.
 */
export function serverClockJumped(ctx: Context, state: ElectionState, stepMs: number, now: number): Decision {
  return stepDown(
    ctx,
    state,
    now,
    `the database server's clock jumped forward by at least ${seconds(stepMs)}, more than the safety margin`,
  );
}

/**
 * The wall clock moved more than the margin beyond the monotonic clock since the last check: the
 * host was suspended (the monotonic clock stood still, the server's did not), or its wall clock was
 * stepped forward. The term may have ended on the server long ago, so it ends here.
 */
export function hostSuspended(ctx: Context, state: ElectionState, gapMs: number, now: number): Decision {
  return stepDown(
    ctx,
    state,
    now,
    `the wall clock moved ${seconds(gapMs)} more than the monotonic clock (the host was suspended, or its clock stepped forward), more than the safety margin`,
  );
}

/**
 * Stopping: the term is released here, before the release statement is sent. Once that commits,
 * a follower that hears its notice claims at once, and this process must not say leader by then.
 * Only a failed statement is reported after it (releaseFailed).
 */
export function releasing(ctx: Context, fence: number, now: number): Decision {
  return {
    outcome: "released",
    sentence: `released lease ${ctx.key} (fence ${fence})`,
    state: initialState,
    wakeAt: now,
  };
}

/**
 * The campaign gate closed while leading: the work has ended and beforeRelease ran (as for stop()),
 * and the term ends here before the release statement goes out, scoped to its fence.
 */
export function resigned(ctx: Context, fence: number, reason: string, now: number): Decision {
  return {
    outcome: "resigned",
    sentence: `handed over lease ${ctx.key} (fence ${fence}): ${reason}`,
    state: initialState,
    wakeAt: now + ctx.timing.retryIntervalMs,
    release: fence,
  };
}

/** Stopping, the release itself failed: the term, no longer led, ends on the server at its expiry. */
export function releaseFailed(ctx: Context, fence: number, error: unknown, now: number): Decision {
  const reason = error instanceof Error ? error.message : String(error);
  return {
    outcome: "transient-error",
    sentence: `stopped leading lease ${ctx.key} (fence ${fence}) but could not release it (${reason}); it ends on the server at its expiry`,
    state: initialState,
    wakeAt: now,
  };
}

/** A claim whose answer arrived only after its call timed out turned out to have won. */
export function lateClaimWon(ctx: Context, fence: number, now: number): Decision {
  return refuse(
    ctx,
    fence,
    `a claim of lease ${ctx.key} that had timed out won fence ${fence} after all; releasing it`,
    now,
  );
}

/** Stopping: a claim that was in flight when stop() began won. Nothing may start now. */
export function wonWhileStopping(ctx: Context, fence: number, now: number): Decision {
  return refuse(ctx, fence, `won lease ${ctx.key} with fence ${fence} while stopping; releasing it`, now);
}

/**
 * Stopping as a follower: the row still holds a live term in this holder's name, left by a claim
 * or renew whose answer came too late or never. Nobody leads it; it is released.
 */
export function strayTerm(ctx: Context, fence: number, now: number): Decision {
  return refuse(
    ctx,
    fence,
    `lease ${ctx.key} (fence ${fence}) was held in this holder's name by a write whose answer never counted; releasing it`,
    now,
  );
}

/** Releasing a refused term failed: it ends on the server at its expiry, and nobody leads it. */
export function refusedReleaseFailed(
  ctx: Context,
  state: ElectionState,
  fence: number,
  error: unknown,
  now: number,
): Decision {
  const reason = error instanceof Error ? error.message : String(error);
  return {
    outcome: "transient-error",
    sentence: `could not release refused fence ${fence} of lease ${ctx.key} (${reason}); it ends on the server at its expiry`,
    state,
    wakeAt: now + ctx.timing.transientRetryMs,
  };
}

export function refuse(ctx: Context, fence: number, sentence: string, now: number): Decision {
  return {
    outcome: "refused",
    sentence,
    state: initialState,
    wakeAt: now + ctx.timing.transientRetryMs,
    release: fence,
  };
}
