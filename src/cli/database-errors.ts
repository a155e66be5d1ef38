// Database failures that are the user's to fix, phrased with the fix. Messages come from pg and
// never contain the password; they are still scrubbed where they are printed.
import { isUnreachable } from "../lease/connection-errors.ts";

export function explainDatabaseError(error: unknown): Error {
  if (!(error instanceof Error)) return new Error(String(error));
  const code = (error as { code?: string }).code ?? "";
  const message = error.message;
  if (isUnreachable(error)) {
    return new Error(
      `cannot reach PostgreSQL (${message}): check the host and port in DATABASE_URL (or PGHOST/PGPORT) and that the server accepts connections`,
    );
  }
  if (code === "28P01" || code === "28000") {
    return new Error(
      `PostgreSQL refused the login (${message}): check the user and password in DATABASE_URL (or PGUSER/PGPASSWORD)`,
    );
  }
  if (code === "3D000")
    return new Error(`${message}: check the database name in DATABASE_URL (or PGDATABASE)`);
  if (code === "42501") {
    return new Error(
      `${message}: the role needs SELECT, INSERT, UPDATE on the lease table and USAGE on its fence sequence (and CREATE on the schema to migrate); ` +
        "or run `pglease migrate` as the owner and start with --no-migrate",
    );
  }
  return error;
}
