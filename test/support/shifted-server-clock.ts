// Steps the database server's clock as the lease statements see it, on a real PostgreSQL: a
// schema whose clock_timestamp() is the real one plus an offset kept in a table, searched before
// pg_catalog by the sessions of one pool only. Everything else is the server's own doing.
import pg from "pg";

const SCHEMA = "pglease_test_clock";

export interface ShiftedServerClock {
  /** A pool whose sessions see the shifted clock. */
  pool: pg.Pool;
  /** Sets the offset, in ms, from the server's real clock (negative: behind). */
  shift(ms: number): Promise<void>;
}

export async function shiftedServerClock(url: string): Promise<ShiftedServerClock> {
  const setup = new pg.Client({ connectionString: url });
  await setup.connect();
  try {
    await setup.query(`CREATE SCHEMA IF NOT EXISTS ${SCHEMA}`);
    await setup.query(`CREATE TABLE IF NOT EXISTS ${SCHEMA}.offset_ms (ms float8 NOT NULL)`);
    await setup.query(
      `INSERT INTO ${SCHEMA}.offset_ms SELECT 0 WHERE NOT EXISTS (SELECT 1 FROM ${SCHEMA}.offset_ms)`,
    );
    await setup.query(`CREATE OR REPLACE FUNCTION ${SCHEMA}.clock_timestamp() RETURNS timestamptz
      LANGUAGE sql VOLATILE AS $$
        SELECT pg_catalog.clock_timestamp() + (SELECT ms FROM ${SCHEMA}.offset_ms) * interval '1 millisecond'
      $$`);
  } finally {
    await setup.end();
  }
  const pool = new pg.Pool({
    connectionString: url,
    max: 2,
    // Named before pg_catalog, the schema's clock_timestamp() wins over the built-in one.
    options: `-c search_path=${SCHEMA},pg_catalog,public`,
  });
  return {
    pool,
    shift: async (ms) => {
      await pool.query(`UPDATE ${SCHEMA}.offset_ms SET ms = $1`, [ms]);
    },
  };
}
