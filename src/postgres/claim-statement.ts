// The claim: one statement that takes a free, expired or own lease (or a dead predecessor's, a
// term whose recorded session is gone, or one whose holder the kubelet reported terminated),
// honours a handover's reservation, and otherwise answers who holds it, all at one server instant.
import type { ClaimAnswer } from "../election/ports.ts";
import { parseFence } from "../shared/fence-token.ts";
import { CHANGE_SETTING, REASON_SETTING } from "./history.ts";
import type { HolderSession } from "./release-feed.ts";
import { NOW, PROOF, SESSION_GONE, TTL_MS } from "./statement-parts.ts";
import type { LeaseTable } from "./table.ts";

export const claimSql = (t: LeaseTable) => `
  WITH ${NOW},
  -- Crash takeover names itself for the history trigger (which cannot tell it from a session takeover).
  named AS (
    SELECT set_config('${REASON_SETTING}', CASE WHEN EXISTS (
             SELECT 1 FROM ${t.qualified} l WHERE l.key = $1 AND l.holder = ANY($7::text[])
                AND l.holder <> $2 AND l.expires_at > clock_timestamp()) THEN 'crash-takeover' ELSE '' END, true) AS reason
  ),
  claimed AS (
    INSERT INTO ${t.qualified} AS lease (key, holder, fence, acquired_at, expires_at,
                                         session_fence, session_pid, session_started_at, session_server_started_at)
    -- Fences come from a sequence the table does not own: deleting rows or recreating the table never restarts them.
    SELECT $1, $2, drawn.fence, now.t, now.t + $3 * interval '1 millisecond',
           CASE WHEN $4::integer IS NULL THEN NULL ELSE drawn.fence END, $4::integer, $5::timestamptz, $6::timestamptz
      FROM now, named, (SELECT nextval('${t.fenceSequence}') AS fence) drawn
     WHERE named.reason IS NOT NULL
    ON CONFLICT (key) DO UPDATE SET
      holder = EXCLUDED.holder,
      -- Every win is a new term, the same holder's included: above the sequence and above the row.
      fence = greatest(EXCLUDED.fence, lease.fence + 1),
      acquired_at = EXCLUDED.acquired_at,
      -- Only grows: the holder's queued claim carrying an older clock never shortens its lease.
      expires_at = greatest(lease.expires_at, EXCLUDED.expires_at),
      -- The session belongs to the term it was recorded with: the fence this very update writes.
      session_fence = CASE WHEN EXCLUDED.session_pid IS NULL THEN NULL ELSE greatest(EXCLUDED.fence, lease.fence + 1) END,
      session_pid = EXCLUDED.session_pid, session_started_at = EXCLUDED.session_started_at,
      session_server_started_at = EXCLUDED.session_server_started_at,
      -- A new term starts without a reservation: a handover is over once anyone claims.
      reserved_for = NULL, reserved_until = NULL
    -- A live lease of another holder is taken over only from a predecessor proven dead: both
    -- carry the same restart lock, which the kernel freed for the claimer only when the other died,
    -- bound earlier (so a dead holder's claim delivered late cannot take the lease back).
    WHERE (lease.holder = EXCLUDED.holder OR lease.expires_at <= EXCLUDED.acquired_at
       OR (${PROOF("lease")}[1] = ${PROOF("EXCLUDED")}[1] AND ${PROOF("lease")}[2]::numeric < ${PROOF("EXCLUDED")}[2]::numeric)
       -- Session takeover: the holder's recorded session is gone, and with it the holder's renewals.
       OR ${SESSION_GONE}
       -- Crash takeover: the kubelet reported this very holder's process terminated. A holder with
       -- a restart proof names one process (never a later one), so every term it holds is over;
       -- the claim wins only while that exact holder still holds the row.
       OR (lease.holder = ANY($7::text[]) AND ${PROOF("lease")} IS NOT NULL))
      -- A handover's reservation: until it passes only the named candidate may claim, so it claims
      -- first; after it anyone may, so a named candidate that died never leaves the key leaderless.
      AND (lease.reserved_until IS NULL OR lease.reserved_until <= EXCLUDED.acquired_at
           OR lease.reserved_for = EXCLUDED.holder)
    RETURNING holder, fence, acquired_at, expires_at
  ),
  current AS (
    -- FOR SHARE follows a concurrent winner's update to the newest row version.
    -- A claimer a reservation shuts out sees the lease taken until the reservation passes, and
    -- looks again then, not at once.
    SELECT holder, fence, acquired_at,
           CASE WHEN reserved_for IS DISTINCT FROM $2 THEN greatest(expires_at, reserved_until)
                ELSE expires_at END AS expires_at
      FROM ${t.qualified}
    WHERE key = $1 AND NOT EXISTS (SELECT 1 FROM claimed) FOR SHARE
  )
  -- The history trigger publishes how the row changed hands; an insert leaves it unset.
  SELECT true AS won, c.holder, c.fence::text, c.acquired_at, c.expires_at, ${TTL_MS("c.expires_at")} AS ttl_ms,
         nullif(current_setting('${CHANGE_SETTING}', true), '') AS change
    FROM claimed c, now
  UNION ALL
  SELECT false, c.holder, c.fence::text, c.acquired_at, c.expires_at, ${TTL_MS("c.expires_at")}, NULL
    FROM current c, now`;

interface ClaimRow {
  won: boolean;
  holder: string;
  fence: string;
  acquired_at: Date;
  expires_at: Date;
  ttl_ms: number;
  change: string | null;
}

/** The trigger's JSON (reason, previous_holder); absent when the row was inserted, a plain claim. */
function changeOf(text: string | null | undefined): { reason: string; previousHolder: string | null } {
  if (!text) return { reason: "claim", previousHolder: null };
  const parsed = JSON.parse(text) as { reason: string; previous_holder: string | null };
  return { reason: parsed.reason, previousHolder: parsed.previous_holder };
}

/** Runs the claim statement (given by name to the store's runner) and reads its one row. */
export async function runClaim(
  run: (values: unknown[]) => Promise<ClaimRow[]>,
  key: string,
  holder: string,
  durationMs: number,
  session: HolderSession | null,
  crashed: readonly string[] = [],
): Promise<ClaimAnswer> {
  const [row] = await run([
    key,
    holder,
    durationMs,
    session?.pid ?? null,
    session?.startedAt ?? null,
    session?.serverStartedAt ?? null,
    crashed,
  ]);
  if (!row) return { won: false, holder: null, fence: null, expiresAt: null, ttlMs: null };
  const fence = parseFence(row.fence);
  if (row.won) {
    return {
      won: true,
      fence,
      acquiredAt: row.acquired_at,
      expiresAt: row.expires_at,
      ttlMs: row.ttl_ms,
      change: changeOf(row.change),
    };
  }
  return { won: false, holder: row.holder, fence, expiresAt: row.expires_at, ttlMs: row.ttl_ms };
}
