/**
 * Leader election on a lease, independent of where the lease is stored.
 *
 * Guaranteed: a leader's local leadership (isLeader(), the work signal) ends at a local
 * deadline computed from the send time of its last successful claim or renew and the
 * server's own ttl, minus a safety margin — before the server can hand the lease to anyone
 * else, as long as the process is not paused longer than that margin. Fences strictly
 * increase across every change of hands.
 *
 * Not guaranteed: that two processes never *believe* they lead at once. A process frozen
 * past its deadline (GC pause, SIGSTOP, a blocked event loop) wakes up believing until its
 * next check. Only a resource that rejects stale fences closes that window: see src/fence.
 */
export { type Clock, ManualClock, monotonicClock, type Timer } from "./clock.ts";
export type { Decision, ElectionState, Outcome } from "./decide.ts";
export {
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
