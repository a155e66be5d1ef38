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
const PROOF_OF = (holder: string) => `(regexp_match(${holder}, '${RESTART_PROOF_PATTERN}'))`;
export const PROOF = (row: string) => PROOF_OF(`${row}.holder`);

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
// and is none of the holder, its proven-dead predecessor and the holders reported terminated (a
// dead process's row stays live until its seen_until), ranked as rankCandidates
// (src/candidacy/plan.ts) ranks them, which test/candidacy/successor-ranking.test.ts holds it to on
// random candidate sets. started_at is compared to the millisecond, as TypeScript sees it (a
// Date), and holders byte by byte (COLLATE "C"), as it compares them. The pieces a release statement takes to write the
// reservation (the claim then lets only that candidate claim until it passes); NO_SUCCESSOR
// leaves the statement as it was, with no reference to the candidates table: a role that cannot
// read it still releases.
export interface SuccessorParts {
  /** CTEs, each followed by a comma. */
  cte: string;
  /** Appended to the SET list. */
  set: string;
  /** Joined to the UPDATE's FROM item that carries the key (`on` names its key column). */
  join: string;
  returning: string;
  /** Appended to the final SELECT's columns, which read `released`. */
  notify: string;
}

export const NO_SUCCESSOR: SuccessorParts = { cte: "", set: "", join: "", returning: "", notify: "" };

export const SUCCESSOR = (
  t: LeaseTable,
  p: { keys: string; holder: string; reservationMs: string; crashed: string; on: string },
): SuccessorParts => ({
  cte: `
  eligible AS (
    SELECT c.key, c.holder, c.priority, c.revision, date_trunc('milliseconds', c.started_at) AS started_at
      FROM ${t.candidates} c, now
     -- Live by the statement's instant (the clock that wrote seen_until), willing to lead, not the holder.
     WHERE c.key = ANY(${p.keys}) AND c.holder <> ${p.holder} AND c.leads AND c.seen_until > now.t
       -- Nor the holder's predecessor proven dead (same restart lock, bound earlier): its row outlives it.
       AND NOT coalesce(${PROOF("c")}[1] = ${PROOF_OF(`${p.holder}::text`)}[1]
                        AND ${PROOF("c")}[2]::numeric < ${PROOF_OF(`${p.holder}::text`)}[2]::numeric, false)
       -- Nor one the kubelet reported terminated (the claim's crash-takeover witness).
       AND c.holder <> ALL(${p.crashed})),
  -- The revision of the candidate that began campaigning last: in a rollout, the new pods'.
  newest AS (
    SELECT DISTINCT ON (key) key, revision FROM eligible WHERE revision IS NOT NULL
     ORDER BY key, started_at DESC, holder COLLATE "C"),
  successor AS (
    SELECT DISTINCT ON (e.key) e.key, e.holder
      FROM eligible e LEFT JOIN newest n ON n.key = e.key
     ORDER BY e.key, e.priority DESC, coalesce(e.revision = n.revision, false) DESC, e.started_at,
              e.holder COLLATE "C"),`,
  // Without a live candidate the row's reservation stays as it was, as a plain release leaves it.
  set: `,
    reserved_for = coalesce(successor.holder, lease.reserved_for),
    reserved_until = CASE WHEN successor.holder IS NULL THEN lease.reserved_until
                          ELSE now.t + ${p.reservationMs} * interval '1 millisecond' END`,
  join: ` LEFT JOIN successor ON successor.key = ${p.on}`,
  returning: ", successor.holder AS successor",
  // The successor's candidacy hears it is the one named, as a handover's reserve tells it.
  notify: `,
         CASE WHEN successor IS NOT NULL THEN pg_notify('${t.handoverChannel}', key) END`,
});
