/**
 * pglease: leader election backed by a lease row in PostgreSQL.
 *
 * openLeases() is the front door for a process that campaigns for leases; the election
 * (src/election) is independent of PostgreSQL and Kubernetes, the store (src/lease) holds
 * the SQL, and src/fence makes leader-only writes reject stale fences.
 */
export * from "./election/index.ts";
export * from "./fence/index.ts";
export * from "./lease/index.ts";
export {
  type CampaignOptions,
  type Leases,
  type OpenLeasesOptions,
  openLeases,
} from "./library/open-leases.ts";
