// The statements for many leases of one holder at once (BatchedRenewals sends them): each row is
// still checked against its own key, holder and fence, exactly as the single statements do.
// Always planned per call: a prepared generic plan can scan the table once per key when statistics
// are missing (measured: 64 s for 10,000 leases instead of ~0.1 s).
import { parseFence } from "../shared/fence-token.ts";
import { SET_BASED_SETTING } from "./history.ts";
import {
  END_TERM,
  LIVE,
  NO_SUCCESSOR,
  NOW,
  SESSION_GONE,
  SUCCESSOR,
  type SuccessorParts,
  TTL_MS,
} from "./statement-parts.ts";
import type { LeaseTable } from "./table.ts";

type Run<R> = (values: unknown[]) => Promise<R[]>;
type Terms = ReadonlyArray<{ key: string; fence: number }>;

export const renewManySql = (t: LeaseTable) => `
  WITH ${NOW}
  -- Only grows, per row, as in a single renew.
  UPDATE ${t.qualified} AS lease SET expires_at = greatest(lease.expires_at, now.t + $2 * interval '1 millisecond')
  FROM now, unnest($3::text[], $4::bigint[]) AS term(key, fence)
  -- The same guard as a single renew, per row: holder, fence and still live.
  WHERE lease.key = term.key AND lease.fence = term.fence AND lease.holder = $1 AND ${LIVE} AND NOT ${SESSION_GONE}
  RETURNING lease.key, lease.fence::text, lease.expires_at, ${TTL_MS("lease.expires_at")} AS ttl_ms`;

/** Renews many terms of one holder in one statement; answers the keys that were renewed. */
export async function runRenewMany(
  run: Run<{ key: string; fence: string; expires_at: Date; ttl_ms: number }>,
  holder: string,
  terms: Terms,
  durationMs: number,
): Promise<Map<string, { fence: number; expiresAt: Date; ttlMs: number }>> {
  const rows = await run([
    holder,
    durationMs,
    terms.map((term) => term.key),
    terms.map((term) => String(term.fence)),
  ]);
  return new Map(
    rows.map((row) => [
      row.key,
      { fence: parseFence(row.fence), expiresAt: row.expires_at, ttlMs: row.ttl_ms },
    ]),
  );
}

// With a successor (a graceful stop, $4 its reservation in ms, $5 the holders reported terminated),
// each row also reserves its lease for its best live candidate (statement-parts.ts, SUCCESSOR).
export const releaseManySql = (t: LeaseTable, s: SuccessorParts = NO_SUCCESSOR) => `
  WITH ${NOW},
  -- Set-based history: one trigger call records every term this statement ends (history.ts).
  -- Set before any row is updated (the UPDATE joins it), for this transaction only.
  named AS (SELECT set_config('${SET_BASED_SETTING}', 'on', true) AS set_based),${s.cte}
  released AS (
    UPDATE ${t.qualified} AS lease SET ${END_TERM}${s.set}
      FROM now, named, unnest($2::text[], $3::bigint[]) AS term(key, fence)${s.join}
     -- The same guard as a single release, per row: this holder, that term's fence, still live.
     WHERE lease.key = term.key AND lease.fence = term.fence AND lease.holder = $1 AND ${LIVE}
       AND named.set_based IS NOT NULL
    RETURNING lease.key, lease.fence${s.returning}
  )
  SELECT key, fence::text, pg_notify('${t.channel}', key)${s.notify} FROM released`;

export const releaseManyToSuccessorsSql = (t: LeaseTable) =>
  releaseManySql(
    t,
    SUCCESSOR(t, {
      keys: "$2::text[]",
      holder: "$1",
      reservationMs: "$4::bigint",
      crashed: "$5::text[]",
      on: "term.key",
    }),
  );

/** Releases many terms of one holder in one statement and announces each; answers the fence released per key. */
export async function runReleaseMany(
  run: Run<{ key: string; fence: string }>,
  holder: string,
  terms: Terms,
): Promise<Map<string, number>> {
  const rows = await run([holder, terms.map((term) => term.key), terms.map((term) => String(term.fence))]);
  return new Map(rows.map((row) => [row.key, parseFence(row.fence)]));
}
