// How an elector's terms end on purpose: a hand-over when its campaign gate closes, its stop,
// and the terms it won but will not lead (a claim answered late, a win while stopping, a write
// that got no answer). Each ends the term here before the release is sent: no elector believes
// it leads once its release may have been seen.
import { settledWithin } from "./bounded.ts";
import {
  type Decision,
  lateClaimWon,
  refusedReleaseFailed,
  releaseFailed,
  releasing,
  resigned,
  strayTerm,
  type Term,
} from "./decide.ts";
import type { ElectorCore } from "./elector-core.ts";

/**
 * The campaign gate closed while leading: as stop() does, the work ends and beforeRelease runs
 * (bounded, and never past the deadline), then a write still queued on the server settles, so no
 * renew revives the term after its release. The caller applies the decision, then releases.
 */
export async function handOver(core: ElectorCore, reason: string): Promise<Decision> {
  const term = core.state().term;
  if (!term) throw new Error("a hand-over without a term");
  core.work?.abort(`handing over lease ${core.key}: ${reason}`);
  await drain(core, term, reason);
  await core.unanswered.settled();
  return resigned(core.ctx, term.fence, reason, core.clock.now());
}

/** Waits for the work, then beforeRelease: each bounded, and never past the local deadline. */
export async function drain(core: ElectorCore, term: Term, reason: string): Promise<void> {
  // The deadline timer stays armed and steps down if a wait runs that long.
  const bound = () => Math.max(0, Math.min(core.stopTimeoutMs, term.deadline - core.clock.now()));
  await core.work?.ended(bound());
  const demote = core.options.beforeRelease;
  if (demote) {
    const demoted = Promise.resolve().then(() => demote({ key: core.key, fence: term.fence, reason }));
    await settledWithin(core.clock, bound(), demoted);
  }
}

/** A follower first waits (bounded) for a claim that got no answer: if it won after all, that term is refused. */
export async function settleUncertainClaim(core: ElectorCore): Promise<void> {
  const answer = await core.unanswered.settleClaim();
  if (!answer?.won) return;
  core.apply(lateClaimWon(core.ctx, answer.fence, core.clock.now()), "claim", 0, false);
  await releaseRefused(core, answer.fence);
}

/** Ends a term this elector won but will not lead; if that fails, it ends at its expiry. */
export async function releaseRefused(core: ElectorCore, fence: number): Promise<void> {
  try {
    await core.call(core.options.store.release(core.key, core.holder, fence));
  } catch (error) {
    const failed = refusedReleaseFailed(core.ctx, core.state(), fence, error, core.clock.now());
    core.apply(failed, "release", 0, false);
  }
}

/** Ends the term here first (unless its deadline or a loss already did), then on the server. */
export async function releaseTerm(core: ElectorCore, fence: number): Promise<void> {
  if (core.state().role === "leader") {
    core.apply(releasing(core.ctx, fence, core.clock.now()), "release", 0, false);
  }
  const sentAt = core.clock.now();
  try {
    // Scoped to this term's fence: harmless if the term already ended.
    await core.call(core.options.store.release(core.key, core.holder, fence));
  } catch (error) {
    const failed = releaseFailed(core.ctx, fence, error, core.clock.now());
    core.apply(failed, "release", core.clock.now() - sentAt, false);
  }
}

/** A write without a timely answer may have left a live term in this holder's name: release it. */
export async function releaseStrayTerm(core: ElectorCore): Promise<void> {
  try {
    const view = await core.call(core.options.store.read(core.key));
    if (view && view.holder === core.holder && view.ttlMs > 0) {
      core.apply(strayTerm(core.ctx, view.fence, core.clock.now()), "release", 0, false);
      await releaseRefused(core, view.fence);
    }
  } catch {
    // Unreachable: the term, if any, ends at its expiry on the server.
  }
}
