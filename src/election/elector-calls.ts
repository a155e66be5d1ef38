// One tick's store call: the action nextAction chose (renew, read then perhaps claim, claim, or a
// hand-over), turned into a Decision by decide.ts. Every answer's server time feeds the clock watch.
import {
  type Action,
  afterClaim,
  afterRead,
  afterRenew,
  type Context,
  type Decision,
  serverClockJumped,
  wonOnLostSession,
} from "./decide.ts";
import type { ElectorCore } from "./elector-core.ts";
import { handOver } from "./elector-stop.ts";
import { emitSafely } from "./elector-types.ts";

export async function perform(
  core: ElectorCore,
  ctx: Context,
  action: Action,
  sentAt: number,
  unfit: string | null,
): Promise<Decision> {
  const { store, campaign } = core.options;
  const { leaseDurationMs } = core.timing;
  if (action === "resign") return handOver(core, unfit ?? "its campaign gate closed");
  if (action === "renew") {
    const term = core.state().term;
    if (!term) throw new Error("renew without a term");
    const renew = store.renew(core.key, core.holder, term.fence, leaseDurationMs);
    const answer = await core.unanswered.write(renew, (o) => core.call(o));
    const receivedAt = core.clock.now();
    const step = answer.renewed ? observeServer(core, answer, sentAt, receivedAt) : null;
    if (step?.direction === "forward") return serverClockJumped(ctx, core.state(), step.sizeMs, receivedAt);
    return afterRenew(ctx, core.state(), answer, sentAt, receivedAt);
  }
  if (action === "read") {
    const view = await core.call(store.read(core.key));
    const receivedAt = core.clock.now();
    if (view) observeServer(core, view, sentAt, receivedAt);
    // Asked again: the gate may have closed while the read was out, and a claim follows at once.
    const decision = afterRead(ctx, view, receivedAt, campaign?.reasonNotToLead() ?? null);
    // Free, expired or ours: claim in the same tick.
    if (decision) return decision;
    sentAt = receivedAt;
  }
  // The store reads the notice session to record as it sends the claim, in this very turn.
  const losses = core.sessionLosses();
  const claim = store.claim(core.key, core.holder, leaseDurationMs);
  const answer = await core.unanswered.claim(claim, (o) => core.call(o));
  const receivedAt = core.clock.now();
  observeServer(core, answer, sentAt, receivedAt);
  // The term records a session this process has given up: it may be taken over any moment.
  if (answer.won && core.sessionLosses() !== losses) return wonOnLostSession(ctx, answer.fence, receivedAt);
  return afterClaim(ctx, answer, sentAt, receivedAt, core.handedOut());
}

/** Feeds one answer's server time to the clock watch; a step is reported, and returned. */
function observeServer(
  core: ElectorCore,
  answer: { expiresAt: Date | null; ttlMs: number | null },
  sentAt: number,
  receivedAt: number,
) {
  const step = core.serverClock.observe(answer, sentAt, receivedAt);
  if (answer.expiresAt !== null && answer.ttlMs !== null) {
    const serverNowMs = answer.expiresAt.getTime() - answer.ttlMs;
    emitSafely(core.events, "server-time", { serverNowMs, roundTripMs: receivedAt - sentAt });
  }
  if (step) emitSafely(core.events, "clock-step", step);
  return step;
}
