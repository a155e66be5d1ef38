/**
 * Leader election on a lease, independent of where the lease is stored: the pure decision
 * (decide.ts) and the elector that runs it against a LeaseStore and a ReleaseFeed.
 *
 * What it guarantees, what it assumes (pauses shorter than the margin, a server clock slewed and
 * not stepped, server-side statement timeouts, one elector per key and holder, commits that
 * survive a failover) and what it does not (that two processes never *believe* they lead at once;
 * only a resource that rejects stale fences closes that window, see src/fence) are stated once,
 * in docs/guarantees.md. A change to any of them changes that page.
 */

export { type Clock, monotonicClock, type Timer } from "../shared/clock.ts";
export { type CampaignGate, CampaignSwitch } from "./campaign-gate.ts";
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
