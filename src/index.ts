/**
 * pglease: leader election backed by a lease row in PostgreSQL. This is the application's API,
 * what the README's library example, the fenced reconciler (deploy/examples) and leader-only code
 * beside the sidecar use: openLeases() and what it returns, the elector's status and events, the
 * fence guard and the leadership readers, and the errors these throw. Building blocks for a
 * process that assembles the stack itself are in "pglease/advanced" (src/advanced.ts). Every name
 * here is a promise: api/pglease.api.md is the reviewed surface (docs/api.md says how to update it).
 *
 * openLeases() (src/leases/open-leases.ts) is the one composition root of the lease stack, also used by
 * `pglease run` and the operator commands; the election (src/election) is independent of
 * PostgreSQL and Kubernetes, the store (src/postgres) holds the SQL, and src/fence makes leader-only
 * writes reject stale fences.
 */

// Candidates and handovers: a campaign's priority, leases.handover() and its refusals.
export type { CandidateOptions } from "./candidacy/candidacy.ts";
export {
  HandoverNotTaken,
  HandoverRefused,
  type HandoverRequest,
  type HandoverResult,
} from "./candidacy/plan.ts";
// The elector that campaign() returns: its options, status and events, and the campaign gate.
export type { ElectorEvents } from "./election/elector-types.ts";
export {
  type CampaignGate,
  CampaignSwitch,
  type Clock,
  type ClockStepReport,
  type Decision,
  type ElectionState,
  type Elector,
  type ElectorOptions,
  type ElectorStatus,
  type LeaderSeen,
  type LeaderTerm,
  type Outcome,
  type ReleaseFeed,
  type TickReport,
  type Timer,
  type Timing,
  TimingError,
  type TimingInput,
} from "./election/index.ts";
// Writing safely as the leader: the fence guard, and who leads as the sidecar publishes it.
export {
  createFenceGuard,
  type DownwardApiOptions,
  type DownwardApiReading,
  type DownwardApiWatch,
  type DownwardApiWatchOptions,
  type FencedCallback,
  type FencedWrite,
  type FenceGuard,
  type FenceGuardOptions,
  LeadershipReadError,
  type LeadershipReading,
  type LeadershipSource,
  readDownwardApi,
  readStatusEndpoint,
  StaleFenceError,
  type StatusEndpointOptions,
  type StatusEndpointReading,
  watchDownwardApi,
  withFence,
} from "./fence/index.ts";
export {
  type CampaignOptions,
  type LeaseLogger,
  type Leases,
  type OpenLeasesOptions,
  openLeases,
  ServerRefused,
  SessionTakeoverUnavailable,
  StartAborted,
} from "./leases/open-leases.ts";
// Opening the lease stack, and what it refuses to open with.
export type { Candidate } from "./postgres/candidates.ts";
export type { HistoryRetention } from "./postgres/history-prune.ts";
export { HistoryMissingError, LeaseTableMissingError } from "./postgres/migrate.ts";
