// Exponential backoff with jitter, so replicas that failed together do not retry together.
import type { Clock, Timer } from "../shared/clock.ts";

export interface BackoffTiming {
  initialMs: number;
  maxMs: number;
}

/** Delay before retry number `attempt` (0-based): half fixed, half random, capped at maxMs. */
export function backoffDelay(attempt: number, timing: BackoffTiming, random: () => number): number {
  const base = Math.min(timing.maxMs, timing.initialMs * 2 ** Math.min(attempt, 30));
  return base / 2 + random() * (base / 2);
}

/** Resolves after `ms` on `clock`, or at once when `signal` aborts; never rejects. */
export function pause(clock: Clock, ms: number, signal: AbortSignal): Promise<void> {
  if (signal.aborted) return Promise.resolve();
  return new Promise((resolve) => {
    const done = () => {
      timer.cancel();
      signal.removeEventListener("abort", done);
      resolve();
    };
    const timer = clock.setTimer(ms, done);
    signal.addEventListener("abort", done, { once: true });
  });
}

/** Calls `fire` every `intervalMs` until cancelled. */
export function repeat(clock: Clock, intervalMs: number, fire: () => void): Timer {
  let timer: Timer;
  const arm = () => {
    timer = clock.setTimer(intervalMs, () => {
      arm();
      fire();
    });
  };
  arm();
  return { cancel: () => timer.cancel() };
}
