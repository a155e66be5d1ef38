// A pg pool fit for lease statements: an idle connection dying must not crash the process,
// the server itself gives up on a statement once its caller has (so it cannot commit later,
// nor keep a backend waiting on a lock). What the server itself promises is checked by
// server-checks.ts.
import pg from "pg";

export interface LeasePoolOptions {
  connectionString?: string;
  /** TLS settings; a connection string's own sslmode/sslrootcert take precedence (pg's rule). */
  ssl?: pg.ConnectionConfig["ssl"];
  max?: number;
  /** Called for errors on idle connections; the pool has already discarded the connection. */
  onIdleError?: (error: Error) => void;
  applicationName?: string;
  /**
   * The server's `statement_timeout` and `lock_timeout` on every lease connection, in ms: at most
   * the elector's call timeout, so a statement its caller gave up on is cancelled by the server
   * too. Unset leaves the server's own settings (checkServer reports them).
   */
  statementTimeoutMs?: number;
  /**
   * How the server gets those timeouts. "startup" (default): as connection parameters. "role": a
   * transaction-mode PgBouncer refuses startup parameters, so they come from
   * `ALTER ROLE … SET statement_timeout = …, lock_timeout = …`, and checkServer verifies them.
   */
  serverTimeouts?: "startup" | "role";
}

export function createLeasePool(options: LeasePoolOptions = {}): pg.Pool {
  const timeoutMs = options.statementTimeoutMs;
  if (timeoutMs !== undefined && !(Number.isSafeInteger(timeoutMs) && timeoutMs > 0)) {
    throw new TypeError(
      `statementTimeoutMs must be a positive whole number of milliseconds (at most the call timeout), got ${timeoutMs}`,
    );
  }
  const startupTimeouts =
    timeoutMs !== undefined && (options.serverTimeouts ?? "startup") === "startup"
      ? { statement_timeout: timeoutMs, lock_timeout: timeoutMs }
      : {};
  const pool = new pg.Pool({
    ...(options.connectionString ? { connectionString: options.connectionString } : {}),
    ...(options.ssl !== undefined ? { ssl: options.ssl } : {}),
    ...startupTimeouts,
    max: options.max ?? 4,
    idleTimeoutMillis: 30_000,
    connectionTimeoutMillis: 5_000,
    application_name: options.applicationName ?? "pglease",
    keepAlive: true,
  });
  pool.on("error", (error) => options.onIdleError?.(error));
  return pool;
}
