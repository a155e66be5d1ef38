/**
 * pglease: leader election backed by a lease row in PostgreSQL.
 *
 * openLeases() (src/open-leases.ts, the one composition root of the lease stack, also used by
 * `pglease run` and the operator commands) is the front door for a process that campaigns for
 * leases; the election
 * (src/election) is independent of PostgreSQL and Kubernetes, the store (src/lease) holds
 * the SQL, and src/fence makes leader-only writes reject stale fences.
 */
export * from "./election/index.ts";
export * from "./fence/index.ts";
export * from "./lease/index.ts";
export {
  type CampaignOptions,
  type LeaseLogger,
  type Leases,
  type OpenLeasesOptions,
  openLeases,
  ServerRefused,
  SessionTakeoverUnavailable,
  StartAborted,
} from "./open-leases.ts";
