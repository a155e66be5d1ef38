// "Higher priority leads first when the lease is free": while a live candidate of higher priority
// exists, a follower does not claim a free lease at once, but only once it has seen it free for
// one retry interval, so the higher one (which claims on the release notice, or at its next poll)
// wins. Bounded: a higher candidate that is gone, or never claims, costs one retry interval.
// Never applies to a leader: a live leader is never preempted by priority alone.
import type { CampaignGate } from "../election/campaign-gate.ts";
import type { Elector, TickReport } from "../election/elector.ts";

export class PriorityGate implements CampaignGate {
  readonly #priority: number;
  readonly #delayMs: number;
  readonly #listeners = new Set<() => void>();
  #elector: Elector | null = null;
  /** The highest priority of another live candidate that leads, as of the last announcement. */
  #higher: number | null = null;
  /** The lease was seen free at least one delay ago: the wait is over until someone leads again. */
  #waited = false;
  #timer: NodeJS.Timeout | null = null;
  /** performance.now() until which a reservation names this process. */
  #reservedUntil = 0;

  constructor(priority: number, delayMs: number) {
    this.#priority = priority;
    this.#delayMs = delayMs;
  }

  attach(elector: Elector): void {
    this.#elector = elector;
    elector.on("tick", (tick) => this.#observe(tick));
  }

  /** From each announcement: the best priority among the other live candidates that lead. */
  othersBest(priority: number | null): void {
    const higher = priority !== null && priority > this.#priority ? priority : null;
    if (higher === this.#higher) return;
    this.#higher = higher;
    this.#changed();
  }

  /**
   * The lease is reserved for this process for `forMs` (a handover, or a stopping leader's release
   * naming it): only it may claim then, so waiting for a higher one would leave the lease
   * leaderless. Stands aside until the reservation passes, whatever the ticks observe meanwhile.
   */
  reserved(forMs: number): void {
    this.#reservedUntil = performance.now() + forMs;
    this.#changed();
  }

  reasonNotToLead(): string | null {
    if (this.#higher === null || this.#waited || this.#elector?.isLeader()) return null;
    if (performance.now() < this.#reservedUntil) return null;
    return `waiting one retry interval for a live candidate of priority ${this.#higher} (this one: ${this.#priority})`;
  }

  subscribe(changed: () => void): () => void {
    this.#listeners.add(changed);
    return () => this.#listeners.delete(changed);
  }

  close(): void {
    if (this.#timer) clearTimeout(this.#timer);
    this.#timer = null;
  }

  #observe(tick: TickReport): void {
    if (tick.state.role === "leader") return;
    const free = (tick.state.observed?.holder ?? null) === null;
    if (!free) {
      // Someone leads: the next time the lease is free, wait again.
      this.close();
      this.#waited = false;
      return;
    }
    if (this.#waited || this.#timer || this.#higher === null) return;
    this.#timer = setTimeout(() => {
      this.#timer = null;
      this.#waited = true;
      this.#changed();
    }, this.#delayMs);
    this.#timer.unref();
  }

  #changed(): void {
    for (const listener of [...this.#listeners]) listener();
  }
}
