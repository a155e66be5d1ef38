// Polling for what the candidates and servers show, against the lane's deadline and Ctrl-C.
import { setTimeout as delay } from "node:timers/promises";

const POLL_MS = 5;

/** The probe's first non-empty answer; past `timeoutMs`, an error saying `what` (and `detail`'s why). */
export async function until<T>(
  what: string,
  timeoutMs: number,
  signal: AbortSignal,
  probe: () => T | null | undefined | Promise<T | null | undefined>,
  /** What the timeout message adds, to say why. */
  detail?: () => string,
): Promise<T> {
  const deadline = performance.now() + timeoutMs;
  for (;;) {
    signal.throwIfAborted();
    const found = await probe();
    if (found !== null && found !== undefined) return found;
    if (performance.now() > deadline) throw new Error(`${what} within ${timeoutMs} ms${detail?.() ?? ""}`);
    await delay(POLL_MS, undefined, { signal });
  }
}
