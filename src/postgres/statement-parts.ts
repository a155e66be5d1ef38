// The fragments every lease statement shares: one server instant per statement, the liveness of a
// term, the restart proof and the session-takeover test. Kept in one place so that the single and
// the many-lease statements decide the same way.
import { RESTART_PROOF_PATTERN } from "../election/identity.ts";
import type { LeaseTable } from "./table.ts";

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

// A graceful stop's successor, in the release itself: per key, the best live candidate that leads
// and is not the holder, ranked as rankCandidates (src/candidacy/plan.ts) ranks them, which
// test/postgres/successor-ranking.test.ts holds it to on random candidate sets. Empty unless the
// reservation is asked for (a positive `reservationMs`): the plain release pays a one-time filter.
// started_at is compared to the millisecond, as the ranking in TypeScript sees it (a Date), and
// holders byte by byte (COLLATE "C"), as it compares them.
export const SUCCESSORS = (t: LeaseTable, keys: string, holder: string, reservationMs: string) => `
  eligible AS (
    SELECT c.key, c.holder, c.priority, c.revision, date_trunc('milliseconds', c.started_at) AS started_at
      FROM ${t.candidates} c, now
     -- Live by the statement's instant, the clock that wrote seen_until.
     WHERE ${reservationMs} > 0 AND c.key = ANY(${keys}) AND c.holder <> ${holder} AND c.leads
       AND c.seen_until > now.t),
  -- The revision of the candidate that began campaigning last: in a rollout, the new pods'.
  newest AS (
    SELECT DISTINCT ON (key) key, revision FROM eligible WHERE revision IS NOT NULL
     ORDER BY key, started_at DESC, holder COLLATE "C"),
  successor AS (
    SELECT DISTINCT ON (e.key) e.key, e.holder
      FROM eligible e LEFT JOIN newest n ON n.key = e.key
     ORDER BY e.key, e.priority DESC, coalesce(e.revision = n.revision, false) DESC, e.started_at,
              e.holder COLLATE "C")`;

// The reservation a release with a successor writes (the claim lets only it claim until it
// passes); without one the row's reservation stays as it was, as a plain release leaves it.
export const RESERVE_SUCCESSOR = (reservationMs: string) =>
  `reserved_for = coalesce(successor.holder, lease.reserved_for),
   reserved_until = CASE WHEN successor.holder IS NULL THEN lease.reserved_until
                         ELSE now.t + ${reservationMs} * interval '1 millisecond' END`;
