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

export function isUnreachable(error: unknown): boolean {
  if (!(error instanceof Error)) return false;
  const code = (error as { code?: string }).code ?? "";
  return UNREACHABLE_CODES.has(code) || /timeout expired|Connection terminated/.test(error.message);
}
