// A manual clock that can also move without firing its timers, as when the event loop is blocked:
// time passes, and the timers that fell due fire late, in due order, at the next advance().
// Whatever settles in between (an answer that was already on the socket) runs first.
import type { Clock, Timer } from "../../src/election/clock.ts";

export class StallingClock implements Clock {
  #now = 0;
  #seq = 0;
  #timers: Array<{ at: number; fire: () => void; seq: number }> = [];

  now(): number {
    return this.#now;
  }

  setTimer(delayMs: number, fire: () => void): Timer {
    const timer = { at: this.#now + Math.max(0, delayMs), fire, seq: this.#seq++ };
    this.#timers.push(timer);
    return {
      cancel: () => {
        const index = this.#timers.indexOf(timer);
        if (index >= 0) this.#timers.splice(index, 1);
      },
    };
  }

  /** Moves time forward, firing each due timer at its own instant, or now if it is overdue. */
  advance(ms: number): void {
    const target = this.#now + ms;
    for (;;) {
      const due = this.#timers.filter((t) => t.at <= target).sort((a, b) => a.at - b.at || a.seq - b.seq)[0];
      if (!due) break;
      this.#timers.splice(this.#timers.indexOf(due), 1);
      this.#now = Math.max(this.#now, due.at);
      due.fire();
    }
    this.#now = target;
  }

  /** Moves time forward and fires nothing: the timers due meanwhile wait for the next advance(). */
  stall(ms: number): void {
    this.#now += ms;
  }

  pendingTimers(): number {
    return this.#timers.length;
  }
}
