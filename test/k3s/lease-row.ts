// The lease row itself, read from this process, to tell how a change of hands happened: by
// expiry (the new term starts no earlier than the old one's expiry) or by release (before it).
// Timestamps stay in PostgreSQL's text form and are compared by the server, at full precision.
import type pg from "pg";

export interface LeaseRow {
  holder: string;
  fence: string;
  acquiredAt: string;
  expiresAt: string;
}

// Scoped to the key: one row per lease, so this is the whole current term.
const READ_LEASE = `SELECT holder, fence::text AS fence, acquired_at::text AS acquired_at, expires_at::text AS expires_at
  FROM public.pglease_leases WHERE key = $1`;

export async function readLease(client: pg.Client, key: string): Promise<LeaseRow> {
  const { rows } = await client.query(READ_LEASE, [key]);
  const row = rows[0];
  if (!row) throw new Error(`no row for lease ${key} in public.pglease_leases`);
  return { holder: row.holder, fence: row.fence, acquiredAt: row.acquired_at, expiresAt: row.expires_at };
}

// timestamptz comparison, so the text forms compare as instants, time zones and all.
const NOT_BEFORE = "SELECT $1::timestamptz >= $2::timestamptz AS not_before";

export async function isNotBefore(client: pg.Client, instant: string, reference: string): Promise<boolean> {
  const { rows } = await client.query(NOT_BEFORE, [instant, reference]);
  return rows[0]?.not_before === true;
}
