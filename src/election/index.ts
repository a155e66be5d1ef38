/**
 * Leader election on a lease, independent of where the lease is stored.
 *
 * Guaranteed, under the assumptions below:
 * - A leader's local leadership (isLeader(), status(), the work signal) ends at a local deadline:
 *   the send time of its last claim or renew answered in time, plus the ttl the server gave in that
 *   same statement, minus the safety margin; so before the server can hand the lease to anyone,
 *   even while PostgreSQL is unreachable or a call hangs.
 * - No answer received at or after that deadline counts: it starts no work, publishes nothing and
 *   extends nothing. A claim won too late, or won while stopping, is released, not led.
 * - A renew that matches no row ends the term at once, also while stop() is waiting.
 * - Every lead() call gets a fence strictly higher than every fence this elector handed out
 *   before, and starts only once the previous term's work has returned or stopTimeoutMs passed.
 * - A release notice leads to a claim, which the store makes conditional (another holder's live
 *   lease is never taken): a forged notice costs one failed claim and never yields leadership.
 *   A reconnection of the notice feed, or the feed no longer known healthy, leads to a read.
 * - A follower on a healthy feed sends nothing between notices and reads at the observed expiry;
 *   a lost notice costs at most that one expiry. Without a healthy feed it polls every retry.
 * - With a campaign gate (ElectorOptions.campaign), no claim is sent while the gate is closed (it is
 *   asked at each tick and again before a claim that follows a read); a leader whose gate closes
 *   hands over as stop() does: work aborted and awaited, beforeRelease, queued writes settled, then
 *   the release. A claim already out when the gate closes may still win: that term is handed over.
 * - A claim or renew that timed out may still commit: stop() waits for it (bounded by the call
 *   timeout plus a second) before releasing, and releases a term such a write left in its name.
 *
 * Assumed:
 * - The process is not paused longer than the margin between a check and what it acts on.
 * - The database server's clock runs at the rate of this process's monotonic clock. Each answer
 *   carries the server's time (expires_at − ttl); a step beyond the margin is reported as a
 *   "clock-step" event, and a forward one ends leadership at once. A backward step ends nothing.
 * - A suspended host is seen on resume: the wall clock ran ahead of the monotonic one by more than
 *   the margin since the last successful claim or renew ends the term at the next check (every
 *   tick, and each second between), and isLeader() is false at once. A forward NTP step beyond
 *   the margin looks the same and ends the term too; a step back ends nothing.
 * - No statement commits later than the call timeout after it was sent (a server-side statement
 *   timeout), or later than the slack stop() allows.
 * - One elector per key and holder; an acknowledged commit survives a database failover.
 *
 * Not guaranteed: that two processes never *believe* they lead at once. A process frozen past its
 * deadline (GC pause, SIGSTOP, a blocked event loop) believes until its next check, and its work's
 * signal is aborted only when it runs again. "Stopped" means "asked to stop": work that ignores its
 * signal outlives its term. Only a resource that rejects stale fences closes these windows: see
 * src/fence.
 */
export { type CampaignGate, CampaignSwitch } from "./campaign-gate.ts";
export { type Clock, ManualClock, monotonicClock, type Timer } from "./clock.ts";
export type { Decision, ElectionState, Outcome } from "./decide.ts";
export {
  type ClockStepReport,
  Elector,
  type ElectorOptions,
  type ElectorStatus,
  type LeaderSeen,
  type LeaderTerm,
  type TickReport,
} from "./elector.ts";
export { holderIdentity } from "./identity.ts";
export type { ClaimAnswer, LeaseStore, LeaseView, ReleaseFeed, RenewAnswer } from "./ports.ts";
export {
  DEFAULT_LEASE_DURATION_MS,
  DEFAULT_RETRY_INTERVAL_MS,
  resolveTiming,
  type Timing,
  TimingError,
  type TimingInput,
  timingOrThrow,
} from "./timing.ts";
