// The chaos workload's pace, shared by the workload (which keeps it) and the checker (which
// derives from it how long a leader's workload may go without an accepted write).

/** How often the workload asks its sidecar's /status. */
export const POLL_EVERY_MS = 25;
/** How long one /status request may take. */
export const STATUS_TIMEOUT_MS = 150;
/**
 * The longest one write attempt can take before it ends one way or the other: the connection
 * timeout, the query timeout, the server's statement timeout, the guard's lock timeout, and the
 * idle-in-transaction timeout that frees the guard row from a frozen writer are all this long.
 */
export const WRITE_TIMEOUT_MS = 1_000;
/** The pause after a failed write before the next attempt. */
export const ERROR_BACKOFF_MS = 20;

/**
 * A leader whose database link is healthy must get a write accepted at least this often: within
 * three write attempts, each ending within WRITE_TIMEOUT_MS. While it leads, the workload writes
 * back to back; the longest legitimate gap is a first attempt that waits out the guard row behind
 * a frozen writer, a second on a pool connection that died meanwhile, then one that succeeds (the
 * status polls and backoffs between them are tens of ms). The 90 s CI run's longest gap was
 * 697 ms. A longer gap means the workload went quiet, and a stale-write check over a quiet
 * workload passes on nothing.
 */
export const QUIET_BOUND_MS = 3 * WRITE_TIMEOUT_MS;
