// The clock tests drive instead of sleeping: time moves only when a test moves it, and the timers
// an elector, a publisher or a renewal window set fire in time order as it passes them.
import type { Clock, Timer } from "../../src/shared/clock.ts";

/** Where a ManualClock's wall clock starts: any fixed instant. */
const MANUAL_WALL_EPOCH = Date.UTC(2030, 0, 1);

/** A clock that moves only when told to; timers fire in time order as it passes them. */
export class ManualClock implements Clock {
  #now = 0;
  #wallAhead = 0;
  #timers: Array<{ at: number; fire: () => void; seq: number }> = [];
  #seq = 0;

  now(): number {
    return this.#now;
  }

  /** Moves with now(), plus every stepWall(). */
  wallNow(): number {
    return MANUAL_WALL_EPOCH + this.#now + this.#wallAhead;
  }

  /**
   * Moves the wall clock alone, firing nothing: forward as over a host's suspension (the
   * monotonic clock stands still while it sleeps) or an NTP step forward; back as an NTP step back.
   */
  stepWall(ms: number): void {
    this.#wallAhead += ms;
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
