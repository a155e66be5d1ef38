// The simulation's one event loop: every timer of every simulated process, every message and
// every server step is an event at an instant in simulated microseconds. After each event the
// loop lets the JavaScript microtask queue drain completely (the electors' promise chains run to
// their next wait) before it runs the checker and moves time on, so a schedule is a pure
// function of its seed and fault list.
import type { Rng } from "./prng.ts";

/** What an event belongs to: a process whose pauses delay its events, and whose death drops them. */
export interface Owner {
  readonly name: string;
  /** Events due before this instant wait until it (SIGSTOP, a blocked event loop). */
  frozenUntil: number;
  dead: boolean;
}

export interface SimEvent {
  at: number;
  /** Orders events due at the same instant: 0 normally; after a freeze see #defer. */
  tie: number;
  /** When it first fell due: a deferred event keeps it, so events held over two freezes keep their order. */
  dueAt: number;
  seq: number;
  owner: Owner | null;
  fire: () => void;
  cancelled: boolean;
  /** An arriving message rather than a timer: after a freeze it may run before or after timers. */
  io: boolean;
  /** Ranked with what a freeze of its owner held over (see #defer). */
  deferred: boolean;
  /** Held back by a freeze: it existed before its owner woke, and runs later than it was due. */
  late: boolean;
  /** When it was scheduled. */
  createdAt: number;
}

const before = (a: SimEvent, b: SimEvent) =>
  a.at - b.at || a.tie - b.tie || a.dueAt - b.dueAt || a.seq - b.seq;

/**
 * Due at the very instant its process wakes: it is handled with what was held over, in their rank
 * (a timer after the older ones, a message where the scheduler draws), not ahead of them all.
 */
const dueAtWake = (owner: Owner, event: SimEvent) =>
  owner.frozenUntil > 0 && owner.frozenUntil === event.at && !event.deferred;

export class EventLoop {
  nowUs = 0;
  /** The event being handled, until the checker has seen its effects. */
  current: SimEvent | null = null;
  readonly #heap: SimEvent[] = [];
  readonly #rng: Rng;
  #seq = 0;
  #halted = false;

  constructor(rng: Rng) {
    this.#rng = rng;
  }

  at(atUs: number, owner: Owner | null, fire: () => void, io = false): SimEvent {
    const due = Math.max(atUs, this.nowUs);
    const event: SimEvent = {
      at: due,
      tie: 0,
      dueAt: due,
      seq: this.#seq++,
      owner,
      fire,
      cancelled: false,
      io,
      deferred: false,
      late: false,
      createdAt: this.nowUs,
    };
    this.#push(event);
    return event;
  }

  /** Ends the run after the current event (a violation was found). */
  halt(): void {
    this.#halted = true;
  }

  /**
   * Runs events up to `untilUs`. Each event runs in its own turn: the next one is picked from a
   * process.nextTick queued by the last microtask of this turn, and Node runs ticks only once the
   * microtask queue is empty.
   */
  run(untilUs: number, afterStep: () => void): Promise<void> {
    return new Promise((resolve, reject) => {
      const step = () => {
        try {
          for (;;) {
            if (this.current) {
              afterStep();
              this.current = null;
            }
            const event = this.#halted ? null : this.#next(untilUs);
            if (!event) {
              resolve();
              return;
            }
            this.current = event;
            event.fire();
            // Only processes run promise chains; the server's and the faults' events start none.
            if (event.owner !== null) break;
          }
        } catch (error) {
          reject(error);
          return;
        }
        queueMicrotask(() => process.nextTick(step));
      };
      process.nextTick(step);
    });
  }

  #next(untilUs: number): SimEvent | null {
    for (;;) {
      const event = this.#heap[0];
      if (!event || event.at > untilUs) {
        this.nowUs = Math.max(this.nowUs, untilUs);
        return null;
      }
      this.#pop();
      if (event.cancelled || event.owner?.dead) continue;
      this.nowUs = event.at;
      const owner = event.owner;
      if (owner && (owner.frozenUntil > event.at || dueAtWake(owner, event))) {
        this.#defer(event, owner.frozenUntil);
        continue;
      }
      return event;
    }
  }

  /**
   * A frozen process runs what fell due in the meantime when it wakes. Its timers keep their
   * order (Node fires them by due time), also when a second freeze holds them again (so neither
   * the instant nor the sequence number is renewed); a message that arrived meanwhile may be read
   * before or after them, depending on where in the loop's phases the freeze struck: the
   * scheduler picks, once.
   */
  #defer(event: SimEvent, untilUs: number): void {
    event.at = untilUs;
    if (!event.deferred) event.tie = event.io ? this.#rng.next() : 0.5;
    event.deferred = true;
    // One the woken process scheduled for its wake instant itself is ranked so, but is not late.
    event.late ||= event.createdAt < untilUs;
    this.#push(event);
  }

  #push(event: SimEvent): void {
    const heap = this.#heap;
    heap.push(event);
    let i = heap.length - 1;
    while (i > 0) {
      const parent = (i - 1) >> 1;
      const p = heap[parent] as SimEvent;
      if (before(p, event) <= 0) break;
      heap[i] = p;
      i = parent;
    }
    heap[i] = event;
  }

  #pop(): void {
    const heap = this.#heap;
    const last = heap.pop();
    if (last === undefined || heap.length === 0) return;
    let i = 0;
    for (;;) {
      const left = 2 * i + 1;
      if (left >= heap.length) break;
      const right = left + 1;
      const child =
        right < heap.length && before(heap[right] as SimEvent, heap[left] as SimEvent) < 0 ? right : left;
      if (before(heap[child] as SimEvent, last) >= 0) break;
      heap[i] = heap[child] as SimEvent;
      i = child;
    }
    heap[i] = last;
  }
}
