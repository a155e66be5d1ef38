// Waiting on a real cluster: state converges through controllers and kubelets, so the suite
// looks again until the condition holds or a bound passes, and says what it saw last.

const POLL_INTERVAL_MS = 100;

/**
 * Calls `look` every 100 ms until it returns a value, for at most `timeoutMs`; `lastSeen`
 * explains a timeout. `at` is when the accepted answer arrived (performance.now()), so a caller
 * can measure from an earlier event.
 */
export async function pollUntil<T>(
  what: string,
  timeoutMs: number,
  look: () => Promise<T | undefined>,
  lastSeen: () => string,
): Promise<{ value: T; at: number }> {
  const deadline = performance.now() + timeoutMs;
  for (;;) {
    const value = await look();
    const at = performance.now();
    if (value !== undefined) return { value, at };
    if (at >= deadline) {
      throw new Error(`timed out after ${timeoutMs / 1000} s waiting for ${what}; last seen: ${lastSeen()}`);
    }
    await new Promise((resolve) => setTimeout(resolve, POLL_INTERVAL_MS));
  }
}
