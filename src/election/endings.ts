// How a term ends, or a won term is refused: each a Decision whose sentence is the log line
// and the test oracle. A refused term is one this elector won but will not lead; it releases it.
import { type Context, type Decision, type ElectionState, initialState, seconds } from "./state.ts";

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
