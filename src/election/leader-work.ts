// The caller's leader-only work: started for each term with the fence and a signal, aborted
// when the term ends. A failure is reported unless it came from the abort itself. One term's
// work at a time: a new term's work starts once the previous one has returned, or once its
// bounded wait has passed, so two terms' work overlap only when the old one ignores its signal.

import type { Clock } from "../shared/clock.ts";
import { settledWithin } from "./bounded.ts";
import type { LeaderTerm } from "./elector-types.ts";

interface RunningWork {
  abort(reason: string): void;
  /** Settles when the work returns or throws. */
  done: Promise<void>;
  ended: boolean;
}

function startLeaderWork(
  lead: (term: LeaderTerm) => unknown,
  term: Omit<LeaderTerm, "signal">,
  onError: (error: unknown) => void,
): RunningWork {
  const controller = new AbortController();
  const work: RunningWork = {
    abort: (reason) => controller.abort(new Error(reason)),
    done: Promise.resolve()
      .then(() => lead({ ...term, signal: controller.signal }))
      .then(
        () => {},
        (error: unknown) => {
          if (!controller.signal.aborted) onError(error);
        },
      )
      .finally(() => {
        work.ended = true;
      }),
    ended: false,
  };
  return work;
}

export class LeaderWork {
  readonly #clock: Clock;
  readonly #waitMs: number;
  readonly #lead: (term: LeaderTerm) => unknown;
  readonly #onError: (error: unknown) => void;
  #current: RunningWork | null = null;

  constructor(
    clock: Clock,
    waitMs: number,
    lead: (term: LeaderTerm) => unknown,
    onError: (error: unknown) => void,
  ) {
    this.#clock = clock;
    this.#waitMs = waitMs;
    this.#lead = lead;
    this.#onError = onError;
  }

  /** Starts the term's work now, or after the previous work; `stillLeading` is asked at that moment. */
  start(term: Omit<LeaderTerm, "signal">, stillLeading: () => boolean): void {
    const begin = () => {
      if (stillLeading()) this.#current = startLeaderWork(this.#lead, term, this.#onError);
    };
    const previous = this.#current;
    if (!previous || previous.ended) begin();
    else void settledWithin(this.#clock, this.#waitMs, previous.done).then(begin);
  }

  /** Some term's work has not returned yet: ended() would wait. */
  get running(): boolean {
    return this.#current !== null && !this.#current.ended;
  }

  abort(reason: string): void {
    this.#current?.abort(reason);
  }

  /** Resolves when the current work has ended, or after `ms`. */
  ended(ms: number): Promise<void> {
    const current = this.#current;
    return !current || current.ended ? Promise.resolve() : settledWithin(this.#clock, ms, current.done);
  }
}
