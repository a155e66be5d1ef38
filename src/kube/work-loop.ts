// The publisher's one worker: runs its step when woken, and after a failed step again after a
// backoff, until a step succeeds. A wake that arrives while a step runs is kept, not lost.
import type { Clock } from "../shared/clock.ts";
import { type BackoffTiming, backoffDelay, pause } from "./backoff.ts";

export interface WorkLoopOptions {
  clock: Clock;
  backoff: BackoffTiming;
  random: () => number;
  /** Ends the loop: a pending wait or backoff returns at once, no further step starts. */
  stopSignal: AbortSignal;
  step: () => Promise<void>;
  /** After each failed step; `failures` counts the failures in a row. */
  onFailure: (error: unknown, failures: number) => void;
  /** After a step that succeeded; `failures` is how many failed before it. */
  onSuccess: (failures: number) => void;
}

export interface WorkLoop {
  /** Asks for a step; cheap, never waits. */
  wake(): void;
  /** Ends a backoff in progress: the next step starts at once. */
  retryNow(): void;
  /** Runs until stopSignal aborts; call once. */
  run(): Promise<void>;
}

export function createWorkLoop(opts: WorkLoopOptions): WorkLoop {
  let dirty = false;
  let wakeWaiter: (() => void) | null = null;
  let backoffCut = new AbortController();
  const stopped = opts.stopSignal;
  stopped.addEventListener("abort", () => wakeWaiter?.(), { once: true });

  async function run(): Promise<void> {
    let failures = 0;
    while (!stopped.aborted) {
      if (!dirty) await new Promise<void>((resolve) => (wakeWaiter = resolve));
      wakeWaiter = null;
      if (stopped.aborted) return;
      dirty = false;
      try {
        await opts.step();
        opts.onSuccess(failures);
        failures = 0;
      } catch (error) {
        if (stopped.aborted) return;
        failures++;
        opts.onFailure(error, failures);
        dirty = true;
        backoffCut = new AbortController();
        const delay = backoffDelay(failures - 1, opts.backoff, opts.random);
        await pause(opts.clock, delay, AbortSignal.any([stopped, backoffCut.signal]));
      }
    }
  }

  return {
    wake() {
      dirty = true;
      wakeWaiter?.();
    },
    retryNow() {
      backoffCut.abort();
    },
    run,
  };
}
