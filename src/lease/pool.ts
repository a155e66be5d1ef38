// A pg pool fit for lease statements: an idle connection dying must not crash the process,
// and synchronous_commit=off (which could lose an acknowledged claim and reuse its fence) is reported.
import pg from "pg";

export interface LeasePoolOptions {
  connectionString?: string;
  /** TLS settings; a connection string's own sslmode/sslrootcert take precedence (pg's rule). */
  ssl?: pg.ConnectionConfig["ssl"];
  max?: number;
  /** Called for errors on idle connections; the pool has already discarded the connection. */
  onIdleError?: (error: Error) => void;
  applicationName?: string;
}

export function createLeasePool(options: LeasePoolOptions = {}): pg.Pool {
  const pool = new pg.Pool({
    ...(options.connectionString ? { connectionString: options.connectionString } : {}),
    ...(options.ssl !== undefined ? { ssl: options.ssl } : {}),
    max: options.max ?? 4,
    idleTimeoutMillis: 30_000,
    connectionTimeoutMillis: 5_000,
    application_name: options.applicationName ?? "pglease",
    keepAlive: true,
  });
  pool.on("error", (error) => options.onIdleError?.(error));
  return pool;
}

const SYNCHRONOUS_COMMIT = "SELECT current_setting('synchronous_commit') AS value";

/** True when lease writes would commit asynchronously for this role and database. */
export async function asynchronousCommit(pool: pg.Pool): Promise<boolean> {
  const { rows } = await pool.query<{ value: string }>(SYNCHRONOUS_COMMIT);
  return rows[0]?.value === "off";
}
