/**
 * pglease/advanced: the building blocks openLeases() is made of, for a process that assembles the
 * stack itself (its own pool, an elector over its own LeaseStore, a release feed it owns). An
 * application should not need them: openLeases() in "pglease" starts them in the right order,
 * checks the server and closes them in reverse. docs/api.md says what each block assumes.
 * api/pglease-advanced.api.md is the reviewed surface of this entry point.
 */

// The elector alone, over any store that keeps the LeaseStore contract (src/election/ports.ts).
export {
  type ClaimAnswer,
  Elector,
  holderIdentity,
  type LeaseStore,
  type LeaseView,
  type RenewAnswer,
} from "./election/index.ts";
// The PostgreSQL side: a pool whose statements the server itself times out, the store, the table
// and its migration, and the release notices.
export {
  assertTablePresent,
  createLeasePool,
  type LeasePoolOptions,
  type LeaseTable,
  leaseTable,
  migrate,
  PgLeaseStore,
  type PgLeaseStoreOptions,
  PgReleaseFeed,
  type PgReleaseFeedOptions,
  StatementNotSent,
} from "./postgres/index.ts";
export type { HolderSession } from "./postgres/release-feed.ts";
