// The caller's leader-only work for one term: started with the fence and a signal, aborted
// when the term ends. A failure is reported unless it came from the abort itself.
import type { LeaderTerm } from "./elector.ts";

export interface RunningWork {
  abort(reason: string): void;
  /** Settles when the work returns or throws. */
  done: Promise<void>;
}

export function startLeaderWork(
  lead: (term: LeaderTerm) => unknown,
  term: Omit<LeaderTerm, "signal">,
  onError: (error: unknown) => void,
): RunningWork {
  const controller = new AbortController();
  const done = Promise.resolve()
    .then(() => lead({ ...term, signal: controller.signal }))
    .then(
      () => {},
      (error: unknown) => {
        if (!controller.signal.aborted) onError(error);
      },
    );
  return { abort: (reason) => controller.abort(new Error(reason)), done };
}
