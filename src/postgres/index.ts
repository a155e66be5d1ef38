export { BatchedRenewals, type BatchedRenewalsOptions } from "./batched-renewals.ts";
export { assertTablePresent, LeaseTableMissingError, MIGRATION_LOCK_ID, migrate } from "./migrate.ts";
export { createLeasePool, type LeasePoolOptions } from "./pool.ts";
export { PgReleaseFeed, type PgReleaseFeedOptions } from "./release-feed.ts";
export { checkServer, type ServerCheck, type ServerFacts } from "./server-checks.ts";
export { PgLeaseStore, type PgLeaseStoreOptions, StatementNotSent } from "./store.ts";
export { type LeaseTable, leaseTable } from "./table.ts";
