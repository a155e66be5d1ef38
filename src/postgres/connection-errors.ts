// Errors that mean "the server cannot be reached right now" (down, restarting, not yet started),
// as opposed to a refusal the user must fix (a wrong password, a missing privilege).
const UNREACHABLE_CODES = new Set([
  "ECONNREFUSED",
  "ENOTFOUND",
  "EAI_AGAIN",
  "ETIMEDOUT",
  "EHOSTUNREACH",
  "ECONNRESET",
  "57P01", // admin_shutdown
  "57P02", // crash_shutdown
  "57P03", // cannot_connect_now: starting up or shutting down
]);

// A statement that ran out of time (the server's statement_timeout or lock_timeout, or the
// client's query timeout): at start a busy or slow server, waited for like an unreachable one.
const TOO_SLOW_CODES = new Set(["57014", "55P03"]);

export function isTooSlow(error: unknown): boolean {
  if (!(error instanceof Error)) return false;
  const code = (error as { code?: string }).code ?? "";
  return TOO_SLOW_CODES.has(code) || error.message === "Query read timeout";
}

export function isUnreachable(error: unknown): boolean {
  if (!(error instanceof Error)) return false;
  const code = (error as { code?: string }).code ?? "";
  return UNREACHABLE_CODES.has(code) || /timeout expired|Connection terminated/.test(error.message);
}

// too_many_connections: the role's CONNECTION LIMIT, the database's, or max_connections is used up.
// At start it lasts only until other sessions end (a rollout's surge, a stopped process's backends
// still exiting), so it is waited for; the LISTEN connection refused so still means polling.
export function isOutOfConnections(error: unknown): boolean {
  return error instanceof Error && (error as { code?: string }).code === "53300";
}

/**
 * The server answered the statement with an error (pg's DatabaseError: an ErrorResponse, which
 * always carries a severity and a SQLSTATE): it rolled back, so nothing of it was written. Not a
 * lost connection or a client-side timeout, after which it may still have committed.
 */
export function isServerError(error: unknown): error is Error {
  if (!(error instanceof Error)) return false;
  const { code, severity } = error as { code?: unknown; severity?: unknown };
  return typeof code === "string" && typeof severity === "string";
}
