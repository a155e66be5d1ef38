// The fence guard and the leadership readers: everything leader-only code needs to write safely.

export {
  type DownwardApiOptions,
  type DownwardApiReading,
  type DownwardApiWatch,
  type DownwardApiWatchOptions,
  readDownwardApi,
  watchDownwardApi,
} from "./downward-api.ts";
export { parseDownwardApiMap } from "./downward-api-format.ts";
export {
  createFenceGuard,
  type FencedCallback,
  type FencedWrite,
  type FenceGuard,
  type FenceGuardOptions,
  withFence,
} from "./guard.ts";
export { DEFAULT_FENCE_SCHEMA, DEFAULT_FENCE_TABLE, FENCE_MIGRATION_LOCK_ID } from "./guard-table.ts";
export { LeadershipReadError, type LeadershipReading, type LeadershipSource } from "./leadership.ts";
export { StaleFenceError } from "./stale-fence-error.ts";
export {
  readStatusEndpoint,
  type StatusEndpointOptions,
  type StatusEndpointReading,
} from "./status-endpoint.ts";
