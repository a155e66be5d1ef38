// Waiting with a bound on the elector's own clock, so tests with a ManualClock control every
// deadline and a hung call or a stuck piece of leader work never holds the loop.
import type { Clock } from "../shared/clock.ts";

/** The operation's outcome, or a rejection once `ms` has passed without one. */
export function withDeadline<T>(clock: Clock, ms: number, operation: Promise<T>): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    const timer = clock.setTimer(ms, () => reject(new Error(`no answer within ${ms} ms`)));
    operation.then(
      (value) => {
        timer.cancel();
        resolve(value);
      },
      (error: unknown) => {
        timer.cancel();
        reject(error);
      },
    );
  });
}

/** Resolves when the promise settles, however it settles, or after `ms`, whichever is first. */
export function settledWithin(clock: Clock, ms: number, promise: Promise<unknown>): Promise<void> {
  return new Promise((resolve) => {
    const timer = clock.setTimer(ms, () => resolve());
    const done = () => {
      timer.cancel();
      resolve();
    };
    promise.then(done, done);
  });
}

/** The promise's value if it fulfils within `ms`; undefined if it rejects or takes longer. */
export function valueWithin<T>(clock: Clock, ms: number, promise: Promise<T>): Promise<T | undefined> {
  return new Promise((resolve) => {
    const timer = clock.setTimer(ms, () => resolve(undefined));
    promise.then(
      (value) => {
        timer.cancel();
        resolve(value);
      },
      () => {
        timer.cancel();
        resolve(undefined);
      },
    );
  });
}
