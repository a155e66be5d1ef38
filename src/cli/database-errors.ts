// Database failures that are the user's to fix, phrased with the fix. Messages come from pg and
// never contain the password; they are still scrubbed where they are printed.
import pg from "pg";
import { isUnreachable } from "../postgres/connection-errors.ts";

/** SQLSTATE of a missing grant; the read-only commands say which grant reading takes. */
export const INSUFFICIENT_PRIVILEGE = "42501";

const TLS_UNTRUSTED = new Set([
  "SELF_SIGNED_CERT_IN_CHAIN",
  "DEPTH_ZERO_SELF_SIGNED_CERT",
  "UNABLE_TO_VERIFY_LEAF_SIGNATURE",
  "UNABLE_TO_GET_ISSUER_CERT_LOCALLY",
  "CERT_SIGNATURE_FAILURE",
]);

/** An error phrased with its fix; explaining it again leaves it as it is. */
export class ExplainedError extends Error {}

/** What the explanation may name: the database's role, and pglease run's statement timeout. */
export interface ExplainContext {
  /** Undefined: pg resolves PGUSER (or the OS user) as it connects. */
  connectionString?: string | undefined;
  /** pglease run's statement (call) timeout; other commands name the default one. */
  callTimeoutMs?: number;
}

/** pglease run's default statement timeout: half the renew interval of a 15 s lease. */
const DEFAULT_CALL_TIMEOUT_MS = 2_500;

export function explainDatabaseError(error: unknown, context: ExplainContext = {}): Error {
  if (!(error instanceof Error)) return new Error(String(error));
  if (error instanceof ExplainedError) return error;
  const explained = explain(error, context);
  return explained === error ? error : new ExplainedError(explained.message);
}

function explain(error: Error, context: ExplainContext): Error {
  const code = (error as { code?: string }).code ?? "";
  const message = error.message;
  if (/^unsupported startup parameter: (statement|lock)_timeout/.test(message)) {
    // A transaction-mode PgBouncer: the timeouts must come from the role.
    const role = JSON.stringify(new pg.Client({ connectionString: context.connectionString }).user ?? "app");
    const ms = context.callTimeoutMs ?? DEFAULT_CALL_TIMEOUT_MS;
    const which = context.callTimeoutMs === undefined ? "by default" : "here";
    return new Error(
      `${message}: PgBouncer in transaction mode refuses server timeouts sent when connecting: start with ` +
        "--server-timeouts role (PGLEASE_SERVER_TIMEOUTS=role) and set them on the role, e.g. " +
        `ALTER ROLE ${role} SET statement_timeout = '${ms}ms'; ALTER ROLE ${role} SET lock_timeout = '${ms}ms' ` +
        `(at most the statement timeout of pglease run, ${ms} ms ${which})`,
    );
  }
  if (isUnreachable(error)) {
    return new Error(
      `cannot reach PostgreSQL (${message}): check the host and port in DATABASE_URL (or PGHOST/PGPORT) and that the server accepts connections`,
    );
  }
  if (TLS_UNTRUSTED.has(code)) {
    return new Error(
      `the database server's TLS certificate is not trusted (${message}): point PGSSLROOTCERT (or sslrootcert= in DATABASE_URL) ` +
        "at the CA bundle that signed it, e.g. the file mounted from database.tls.caSecret",
    );
  }
  if (code === "ERR_TLS_CERT_ALTNAME_INVALID") {
    return new Error(
      `the database server's TLS certificate does not name the host connected to (${message}): connect with a host name the ` +
        "certificate lists, or use sslmode=verify-ca to check the chain only",
    );
  }
  if (code === "28P01" || code === "28000") {
    return new Error(
      `PostgreSQL refused the login (${message}): check the user and password in DATABASE_URL (or PGUSER/PGPASSWORD)`,
    );
  }
  if (code === "42P01") {
    return new Error(
      `${message}: the lease table has not been created yet: run \`pglease migrate\` (or start \`pglease run\`, which creates it), ` +
        "or check --schema and --table",
    );
  }
  if (code === "3D000")
    return new Error(`${message}: check the database name in DATABASE_URL (or PGDATABASE)`);
  if (code === INSUFFICIENT_PRIVILEGE) {
    return new Error(
      `${message}: the role needs SELECT, INSERT, UPDATE on the lease table and USAGE on its fence sequence (and CREATE on the schema to migrate); ` +
        "or run `pglease migrate` as the owner and start with --no-migrate",
    );
  }
  return error;
}
