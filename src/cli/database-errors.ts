// Database failures that are the user's to fix, phrased with the fix. Messages come from pg and
// never contain the password; they are still scrubbed where they are printed.
import { isUnreachable } from "../lease/connection-errors.ts";

/** SQLSTATE of a missing grant; the read-only commands say which grant reading takes. */
export const INSUFFICIENT_PRIVILEGE = "42501";

const TLS_UNTRUSTED = new Set([
  "SELF_SIGNED_CERT_IN_CHAIN",
  "DEPTH_ZERO_SELF_SIGNED_CERT",
  "UNABLE_TO_VERIFY_LEAF_SIGNATURE",
  "UNABLE_TO_GET_ISSUER_CERT_LOCALLY",
  "CERT_SIGNATURE_FAILURE",
]);

export function explainDatabaseError(error: unknown): Error {
  if (!(error instanceof Error)) return new Error(String(error));
  const code = (error as { code?: string }).code ?? "";
  const message = error.message;
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
