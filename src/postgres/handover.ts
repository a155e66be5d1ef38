// A planned handover (pglease handover, leases.handover): one statement records a reservation
// for the named candidate in the lease row and asks the leader, by NOTIFY, to hand over. The
// leader checks the row before it acts (a notice is a hint, never proof), resigns through its
// campaign gate and releases; the claim SQL lets only the named candidate claim until the
// reservation passes, and anyone after it.
import type pg from "pg";
import { parseFence } from "../shared/fence-token.ts";
import type { LeaseTable } from "./table.ts";

export interface Reservation {
  holder: string;
  fence: number;
  reservedFor: string;
  /** Left of the reservation by the server's clock, ms. */
  reservedForMs: number;
}

export interface LeaseReservation {
  holder: string;
  fence: number;
  /** The term is live by the server's clock. */
  live: boolean;
  reservedFor: string | null;
  /** Left of the reservation by the server's clock, ms; zero or less when passed or absent. */
  reservedForMs: number;
}

const reserveSql = (t: LeaseTable) => `
  WITH now AS (SELECT clock_timestamp() AS t),
  reserved AS (
    UPDATE ${t.qualified} AS lease
       SET reserved_for = $2, reserved_until = now.t + $3 * interval '1 millisecond'
      FROM now
     -- Only a live term of another holder, and only the term the caller saw (fence): a handover
     -- asked of a leader that changed meanwhile would move leadership nobody meant to move.
     WHERE lease.key = $1 AND lease.fence = $4 AND lease.holder <> $2 AND lease.expires_at > clock_timestamp()
    RETURNING lease.key, lease.holder, lease.fence, lease.reserved_until, now.t
  )
  SELECT holder, fence::text, (extract(epoch FROM reserved_until - t) * 1000)::float8 AS reserved_ms,
         pg_notify('${t.handoverChannel}', key)
    FROM reserved`;

const reservationSql = (t: LeaseTable) => `
  SELECT holder, fence::text, expires_at > clock_timestamp() AS live, reserved_for,
         coalesce((extract(epoch FROM reserved_until - clock_timestamp()) * 1000)::float8, 0) AS reserved_ms
    FROM ${t.qualified} WHERE key = $1`;

export class HandoverStore {
  readonly #pool: pg.Pool;
  readonly #timeoutMs: number;
  readonly #sql: { reserve: string; reservation: string };

  constructor(pool: pg.Pool, table: LeaseTable, statementTimeoutMs: number) {
    this.#pool = pool;
    this.#timeoutMs = statementTimeoutMs;
    this.#sql = { reserve: reserveSql(table), reservation: reservationSql(table) };
  }

  /** Reserves the lease for `target` for `windowMs` and asks term `fence`'s holder to hand over; null when that term is over. */
  async reserve(key: string, fence: number, target: string, windowMs: number): Promise<Reservation | null> {
    if (!Number.isSafeInteger(windowMs) || windowMs <= 0) {
      throw new RangeError(
        `the reservation must be a positive whole number of milliseconds, got ${windowMs}`,
      );
    }
    const { rows } = await this.#pool.query<{ holder: string; fence: string; reserved_ms: number }>({
      text: this.#sql.reserve,
      values: [key, target, windowMs, String(fence)],
      query_timeout: this.#timeoutMs,
    } as pg.QueryConfig);
    const row = rows[0];
    return row
      ? {
          holder: row.holder,
          fence: parseFence(row.fence),
          reservedFor: target,
          reservedForMs: row.reserved_ms,
        }
      : null;
  }

  async reservation(key: string): Promise<LeaseReservation | null> {
    const { rows } = await this.#pool.query<{
      holder: string;
      fence: string;
      live: boolean;
      reserved_for: string | null;
      reserved_ms: number;
    }>({ text: this.#sql.reservation, values: [key], query_timeout: this.#timeoutMs } as pg.QueryConfig);
    const row = rows[0];
    return row
      ? {
          holder: row.holder,
          fence: parseFence(row.fence),
          live: row.live,
          reservedFor: row.reserved_for,
          reservedForMs: row.reserved_ms,
        }
      : null;
  }
}
