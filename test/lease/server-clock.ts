// A server clock the test sets, without any test hook in src: the lease statements call
// clock_timestamp() unqualified, and a session whose search_path names a schema before
// pg_catalog resolves it there first. Sessions of the pool made here read the time from a
// one-row table; every other session keeps the real clock.
import pg from "pg";

const SCHEMA = "pglease_test_clock";

const INSTALL = `
  CREATE SCHEMA IF NOT EXISTS ${SCHEMA};
  CREATE TABLE IF NOT EXISTS ${SCHEMA}.now (t timestamptz NOT NULL);
  INSERT INTO ${SCHEMA}.now SELECT pg_catalog.clock_timestamp() WHERE NOT EXISTS (SELECT 1 FROM ${SCHEMA}.now);
  CREATE OR REPLACE FUNCTION ${SCHEMA}.clock_timestamp() RETURNS timestamptz
    LANGUAGE sql VOLATILE AS 'SELECT t FROM ${SCHEMA}.now';`;

export interface ServerClock {
  /** A pool whose sessions see the set clock. */
  pool: pg.Pool;
  /** Sets the clock; answers the instant set. */
  set(at: Date): Promise<Date>;
  /** Moves the clock by `ms` (negative: a backward step); answers the new instant. */
  step(ms: number): Promise<Date>;
  now(): Promise<Date>;
}

export async function installServerClock(url: string, admin: pg.Pool): Promise<ServerClock> {
  await admin.query(INSTALL);
  const pool = new pg.Pool({
    connectionString: url,
    max: 2,
    options: `-c search_path=${SCHEMA},pg_catalog,public`,
  });
  const write = async (sql: string, value: unknown): Promise<Date> => {
    const { rows } = await admin.query<{ t: Date }>(sql, [value]);
    if (!rows[0]) throw new Error("the test clock has no row");
    return rows[0].t;
  };
  return {
    pool,
    set: (at) => write(`UPDATE ${SCHEMA}.now SET t = $1 RETURNING t`, at),
    step: (ms) => write(`UPDATE ${SCHEMA}.now SET t = t + $1 * interval '1 millisecond' RETURNING t`, ms),
    now: async () => {
      const { rows } = await admin.query<{ t: Date }>(`SELECT t FROM ${SCHEMA}.now`);
      if (!rows[0]) throw new Error("the test clock has no row");
      return rows[0].t;
    },
  };
}
