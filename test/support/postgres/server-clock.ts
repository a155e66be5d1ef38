// A database server clock the test sets, on a real PostgreSQL, without any test hook in src: the
// lease statements call clock_timestamp() unqualified, and a session whose search_path names a
// schema before pg_catalog resolves it there first. Sessions of the pool made here read the time
// from a one-row table: the real clock plus an offset (shift), or an instant that stands still
// (set); every other session keeps the real clock.
import pg from "pg";

const SCHEMA = "pglease_test_clock";

const INSTALL = `
  CREATE SCHEMA IF NOT EXISTS ${SCHEMA};
  CREATE TABLE IF NOT EXISTS ${SCHEMA}.clock (frozen_at timestamptz, offset_ms float8 NOT NULL);
  INSERT INTO ${SCHEMA}.clock SELECT NULL, 0 WHERE NOT EXISTS (SELECT 1 FROM ${SCHEMA}.clock);
  CREATE OR REPLACE FUNCTION ${SCHEMA}.clock_timestamp() RETURNS timestamptz
    LANGUAGE sql VOLATILE AS $$
      SELECT coalesce(frozen_at, pg_catalog.clock_timestamp()) + offset_ms * interval '1 millisecond'
        FROM ${SCHEMA}.clock
    $$;`;

// Each write answers the instant the shifted sessions now read.
const SHIFT = `UPDATE ${SCHEMA}.clock SET frozen_at = NULL, offset_ms = $1 RETURNING ${SCHEMA}.clock_timestamp() AS t`;
const SET = `UPDATE ${SCHEMA}.clock SET frozen_at = $1, offset_ms = 0 RETURNING ${SCHEMA}.clock_timestamp() AS t`;
const STEP = `UPDATE ${SCHEMA}.clock SET offset_ms = offset_ms + $1 RETURNING ${SCHEMA}.clock_timestamp() AS t`;
const NOW = `SELECT ${SCHEMA}.clock_timestamp() AS t`;

export interface ServerClock {
  /** A pool whose sessions see the test's clock. */
  pool: pg.Pool;
  /** The real clock plus `ms` (negative: behind); it runs. */
  shift(ms: number): Promise<Date>;
  /** Stands still at `at` until set, shifted or stepped again. */
  set(at: Date): Promise<Date>;
  /** Moves the clock by `ms` (negative: a backward step), running or still. */
  step(ms: number): Promise<Date>;
  now(): Promise<Date>;
  /** Ends the pools (the schema stays, with the test's database). */
  end(): Promise<void>;
}

export async function installServerClock(url: string): Promise<ServerClock> {
  // Its own session for the clock's writes: never queued behind the pool's statements.
  const control = new pg.Pool({ connectionString: url, max: 1 });
  await control.query(INSTALL);
  const pool = new pg.Pool({
    connectionString: url,
    max: 2,
    // Named before pg_catalog, the schema's clock_timestamp() wins over the built-in one.
    options: `-c search_path=${SCHEMA},pg_catalog,public`,
  });
  const write = async (sql: string, value: unknown): Promise<Date> => {
    const { rows } = await control.query<{ t: Date }>(sql, value === undefined ? [] : [value]);
    if (!rows[0]) throw new Error("the test clock has no row");
    return rows[0].t;
  };
  return {
    pool,
    shift: (ms) => write(SHIFT, ms),
    set: (at) => write(SET, at),
    step: (ms) => write(STEP, ms),
    now: () => write(NOW, undefined),
    end: async () => {
      await pool.end();
      await control.end();
    },
  };
}
