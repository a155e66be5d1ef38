// A suspended host (a VM paused, a laptop asleep): the monotonic clock, which the local deadline
// runs on, does not advance while the host sleeps, so on resume a leader would believe for the
// rest of a term that ran out on the server long ago. The wall clock does advance. The deadline
// counts from the send of the last claim or renew that succeeded, so the wall clock's lead over
// the monotonic one is measured from there too, however many checks or failed calls came since:
// two short suspensions add up. Slewing moves the two apart by at most 0.5 ms per second, so a
// lead beyond the safety margin means the host slept, or the wall clock was stepped forward (NTP,
// `date`), which cannot be told apart: both end the term (a needless handover is safe). A step
// back is forgotten as soon as it is seen: it ends nothing and hides no later suspension.
// After a resume no timer fires early (they run on the monotonic clock), so leaders also compare
// the two clocks between ticks, each second, on one timer per clock for all of them.
import type { Clock, Timer } from "../shared/clock.ts";

export interface Reading {
  mono: number;
  wall: number;
}

export class SuspensionWatch {
  readonly #clock: Clock;
  readonly #marginMs: number;
  #mark: Reading | null = null;

  constructor(clock: Clock, marginMs: number) {
    this.#clock = clock;
    this.#marginMs = marginMs;
  }

  /** Both clocks now, or null when the clock has no wall clock (then nothing is ever checked). */
  reading(): Reading | null {
    const wall = this.#clock.wallNow?.();
    return wall === undefined ? null : { mono: this.#clock.now(), wall };
  }

  /** The term's deadline now counts from a call sent at `reading`: so does the suspension. */
  mark(reading: Reading | null): void {
    this.#mark = reading;
  }

  /** How far the wall clock ran ahead of the monotonic one since the mark, if beyond the margin; else null. */
  gap(): number | null {
    const now = this.reading();
    const mark = this.#mark;
    if (now === null || mark === null) return null;
    const gap = now.wall - mark.wall - (now.mono - mark.mono);
    // The wall clock fell behind (stepped back): start counting again from here.
    if (gap < 0) this.#mark = { mono: mark.mono, wall: mark.wall + gap };
    return gap > this.#marginMs ? gap : null;
  }
}

/**
 * How often leading electors compare their clocks between ticks: this bounds how long a resumed
 * leader keeps its work and its pod label. The deadline timer is left as it was, so what races it
 * at the deadline instant still loses.
 */
export const SUSPENSION_CHECK_MS = 1_000;

interface Checks {
  due: Set<() => void>;
  timer: Timer | null;
}

const checksByClock = new WeakMap<Clock, Checks>();

/**
 * Calls `check` every SUSPENSION_CHECK_MS until cancelled, on one timer per clock shared by every
 * check of the process: with 10,000 leases led, one callback a second, not 10,000. The first call
 * comes within one period (at the shared timer's next firing). A clock without a wall clock is
 * never checked, so it gets no timer.
 */
export function everySuspensionCheck(clock: Clock, check: () => void): Timer {
  if (clock.wallNow === undefined) return { cancel: () => {} };
  let checks = checksByClock.get(clock);
  if (!checks) {
    checks = { due: new Set(), timer: null };
    checksByClock.set(clock, checks);
  }
  const shared = checks;
  const arm = () => {
    shared.timer = clock.setTimer(SUSPENSION_CHECK_MS, () => {
      shared.timer = null;
      // A check may end its own registration (a step-down) or another's: each runs once per firing.
      for (const due of [...shared.due]) if (shared.due.has(due)) due();
      if (shared.due.size > 0 && shared.timer === null) arm();
    });
  };
  // A distinct function per registration, so two registrations of one callback stay two.
  const entry = () => check();
  shared.due.add(entry);
  if (shared.timer === null) arm();
  return {
    cancel: () => {
      shared.due.delete(entry);
      if (shared.due.size === 0) {
        shared.timer?.cancel();
        shared.timer = null;
      }
    },
  };
}
