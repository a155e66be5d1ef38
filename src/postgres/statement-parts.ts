// The fragments every lease statement shares: one server instant per statement, the liveness of a
// term, the restart proof and the session-takeover test. Kept in one place so that the single and
// the many-lease statements decide the same way.
import { RESTART_PROOF_PATTERN } from "../election/identity.ts";

// One instant per statement for what it writes and reports, so the expiry and the ttl agree.
export const NOW = "now AS (SELECT clock_timestamp() AS t)";
export const TTL_MS = (col: string) => `(extract(epoch FROM ${col} - now.t) * 1000)::float8`;
// Whether a term is still live is decided by the clock when the statement reaches the row, and
// again when the row is locked only if another transaction changed it meanwhile (PostgreSQL
// re-checks a WHERE only on a new row version): a renew queued behind a mere FOR UPDATE may commit
// past the expiry. Nobody can claim between (claims queue on the same row lock, then see the
// renewed row); test/sim/model-vs-postgres holds the model to both cases.
export const LIVE = "lease.expires_at > clock_timestamp()";

// A holder's restart proof: {lock token, bind instant}, or NULL without one (src/election/identity.ts).
export const PROOF = (row: string) => `(regexp_match(${row}.holder, '${RESTART_PROOF_PATTERN}'))`;

// The term's holder recorded its server session and that session is gone. Only a session recorded
// by this very term counts (a claim that does not write the columns, an older pglease's, bumps the
// fence past them), on this very server (after a restart or a failover every pid is unknown, so
// those terms wait for their expiry); a session whose start is hidden (another role without
// pg_read_all_stats) counts as alive.
export const SESSION_GONE = `CASE WHEN lease.session_fence = lease.fence AND lease.session_pid IS NOT NULL
                            AND lease.session_server_started_at = pg_postmaster_start_time()
  THEN NOT EXISTS (SELECT 1 FROM pg_stat_get_activity(lease.session_pid) a
                   WHERE a.backend_start IS NULL OR a.backend_start = lease.session_started_at)
  ELSE false END`;

// Ends the term at the statement's instant. acquired_at steps back only when the server clock
// stepped back behind it, so the CHECK holds and the lease is free at once.
export const END_TERM =
  "expires_at = now.t, acquired_at = least(lease.acquired_at, now.t - interval '1 microsecond')";
