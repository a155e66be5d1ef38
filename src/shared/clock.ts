// Local time for the elector, the publisher and the renewals: monotonic (never jumps with NTP or
// an operator's `date`), and injectable so tests drive it instead of sleeping
// (test/support/manual-clock.ts).

export interface Timer {
  cancel(): void;
}

export interface Clock {
  /** Milliseconds on a monotonic scale; only differences are meaningful. */
  now(): number;
  setTimer(delayMs: number, fire: () => void): Timer;
  /**
   * Wall-clock milliseconds (Date.now()), read beside now() only to see the host suspended
   * (election/suspension.ts): the monotonic clock stands still while a VM or laptop sleeps, the wall
   * clock does not. A clock without it is never checked.
   */
  wallNow?(): number;
}

export const monotonicClock: Clock = {
  now: () => performance.now(),
  wallNow: () => Date.now(),
  setTimer(delayMs, fire) {
    const handle = setTimeout(fire, Math.max(0, delayMs));
    return { cancel: () => clearTimeout(handle) };
  },
};
