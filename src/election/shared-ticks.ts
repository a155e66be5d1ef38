// Wake-ups of many electors of one process that fall due at the same instant, on one timer.
// Leaders renew on a grid shared by the whole process (decide.ts, nextRenewal): with one timer
// each, Node runs 10,000 callbacks spread over the loop's phases and fires some of them early
// (a timer counts from the loop's cached time, which lags while the loop is busy), and a renewal
// that runs before its grid instant schedules itself for that same instant again. One timer per
// instant runs every wake-up of that instant in one turn, so the batched store (BatchedRenewals)
// sends them as one statement, and it never fires before the instant on the electors' clock.
import type { Clock, Timer } from "../shared/clock.ts";

interface Tick {
  timer: Timer;
  due: Set<() => void>;
}

const ticksByClock = new WeakMap<Clock, Map<number, Tick>>();

/** Calls `fire` once `clock.now()` has reached `at`, together with every other wake-up due at `at`. */
export function wakeAt(clock: Clock, at: number, fire: () => void): Timer {
  let ticks = ticksByClock.get(clock);
  if (!ticks) {
    ticks = new Map();
    ticksByClock.set(clock, ticks);
  }
  const byInstant = ticks;
  let tick = byInstant.get(at);
  if (!tick) {
    const created: Tick = { timer: { cancel: () => {} }, due: new Set() };
    const arm = () => {
      created.timer = clock.setTimer(at - clock.now(), () => {
        // Early by the clock it serves: wait out the rest rather than run before the instant.
        if (clock.now() < at) return arm();
        byInstant.delete(at);
        for (const callback of created.due) callback();
      });
    };
    arm();
    byInstant.set(at, created);
    tick = created;
  }
  const entry = tick;
  // A distinct function per wake-up, so two registrations of one callback stay two.
  const callback = () => fire();
  entry.due.add(callback);
  return {
    cancel: () => {
      entry.due.delete(callback);
      if (entry.due.size === 0 && byInstant.get(at) === entry) {
        entry.timer.cancel();
        byInstant.delete(at);
      }
    },
  };
}
