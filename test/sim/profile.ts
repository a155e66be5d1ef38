// What the code on this branch does, as model switches. The simulation, its CI batch and the
// differential test all start from here: when the lease statements or the pool change, this
// changes with them, and model-vs-postgres.test.ts fails until it does.
import type { SimOptions } from "./scenario.ts";

export const SHIPPED: Pick<SimOptions, "sem" | "serverTimeout"> = {
  sem: {
    // greatest(lease.expires_at, now + d) in renew, renewMany and claim.
    monotonicExpiry: true,
    // nextval() sits in the INSERT's SELECT: drawn when the claim starts, before its lock wait…
    fenceCounter: "at-start",
    // …and raised by greatest(EXCLUDED.fence, lease.fence + 1) to above the row it overwrites.
    fenceAboveRow: true,
    // LIVE: lease.expires_at > clock_timestamp() in renew, renewMany and release.
    liveAtLock: true,
    // END_TERM: expires_at = now, acquired_at = least(acquired_at, now − 1 µs).
    releaseAtNow: true,
    // The restart clause: a live lease of a holder with the claimer's restart lock, bound earlier.
    restartTakeover: true,
  },
  // openLeases' pool sets statement_timeout and lock_timeout to the statement timeout, which a
  // campaign's call timeout may not undercut.
  serverTimeout: true,
};
