// A skipped suite says why, in one plain line, so a green run never hides a suite that did not run.

/** Prints `[suite] skipped: reason` when there is a reason; answers whether to skip. */
export function skipBecause(suite: string, reason: string | null | false | undefined): boolean {
  if (!reason) return false;
  console.warn(`[${suite}] skipped: ${reason}`);
  return true;
}
