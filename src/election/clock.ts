// Local time for the elector: monotonic (never jumps with NTP or an operator's `date`), and
// injectable so tests drive it instead of sleeping.

export interface Timer {
  cancel(): void;
}

export interface Clock {
  /** Milliseconds on a monotonic scale; only differences are meaningful. */
  now(): number;
  setTimer(delayMs: number, fire: () => void): Timer;
}

export const monotonicClock: Clock = {
  now: () => performance.now(),
  setTimer(delayMs, fire) {
    const handle = setTimeout(fire, Math.max(0, delayMs));
    return { cancel: () => clearTimeout(handle) };
  },
};

/** A clock that moves only when told to; timers fire in time order as it passes them. */
export class ManualClock implements Clock {
  #now = 0;
  #timers: Array<{ at: number; fire: () => void; seq: number }> = [];
  #seq = 0;

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

  /**
   * Moves time forward and fires nothing, as when the event loop is blocked: the timers that fell
   * due fire late, in due order, at the next advance().
   */
  stall(ms: number): void {
    this.#now += ms;
  }

  pendingTimers(): number {
    return this.#timers.length;
  }
}
