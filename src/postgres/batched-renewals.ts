// Renewals and releases of many leases held by one process, coalesced: every renew() asked for
// within a few milliseconds goes out as one `UPDATE … FROM unnest(…)`. Electors renew on a grid
// shared by the process, woken by one timer per instant (election/shared-ticks.ts), so a process
// holding 10,000 leases sends one statement per tick. Releases asked for in one turn of the event
// loop go out as one statement too, each row still checked against its own holder and fence; a
// lone release (a graceful handover) waits only for that turn. close() hands all its electors'
// terms over at once (releaseMany, through stopElectors).

import type { ClaimAnswer, LeaseStore, LeaseView, ReleasesMany, RenewAnswer } from "../election/ports.ts";
import { type Clock, monotonicClock } from "../shared/clock.ts";
import type { PgLeaseStore } from "./store.ts";

interface Pending<A = RenewAnswer> {
  key: string;
  fence: number;
  resolve: (answer: A) => void;
  reject: (error: unknown) => void;
}

export interface BatchedRenewalsOptions {
  /** Most terms per statement; larger batches are split. */
  maxBatch?: number;
  /**
   * How long a renewal waits for others (default 10 ms). Timers due at the same instant still fire
   * a millisecond apart; the elector's deadline counts from before the wait, so it only costs latency.
   */
  windowMs?: number;
  /** Whose timers run the window: give the electors' clock, so a test's ManualClock drives both. */
  clock?: Clock;
  /**
   * Runs `fire` once the current turn of the event loop is over (default setImmediate): releases
   * asked for until then go out together, and a lone one (a graceful handover) waits no timer.
   */
  afterTurn?: (fire: () => void) => void;
}

export class BatchedRenewals implements LeaseStore, ReleasesMany {
  readonly #store: PgLeaseStore;
  readonly #maxBatch: number;
  readonly #windowMs: number;
  readonly #clock: Clock;
  readonly #afterTurn: (fire: () => void) => void;
  /** Pending renewals by holder and duration: one statement renews one holder's terms for one duration. */
  #pending = new Map<string, { holder: string; durationMs: number; terms: Pending[] }>();
  #scheduled = false;
  /** Pending releases by holder. */
  #releases = new Map<string, Array<Pending<boolean>>>();

  constructor(store: PgLeaseStore, options: BatchedRenewalsOptions = {}) {
    this.#store = store;
    this.#maxBatch = options.maxBatch ?? 10_000;
    this.#windowMs = options.windowMs ?? 10;
    this.#clock = options.clock ?? monotonicClock;
    this.#afterTurn = options.afterTurn ?? ((fire) => setImmediate(fire));
  }

  claim(key: string, holder: string, durationMs: number): Promise<ClaimAnswer> {
    return this.#store.claim(key, holder, durationMs);
  }

  release(key: string, holder: string, fence: number): Promise<boolean> {
    return new Promise((resolve, reject) => {
      let terms = this.#releases.get(holder);
      if (!terms) {
        terms = [];
        this.#releases.set(holder, terms);
        // The first release of a turn; the rest of that turn's join it.
        if (this.#releases.size === 1) this.#afterTurn(() => this.#flushReleases());
      }
      terms.push({ key, fence, resolve, reject });
    });
  }

  /** Many terms of one holder at once, as they are (stopElectors): no turn waited for, larger batches split. */
  async releaseMany(
    holder: string,
    terms: ReadonlyArray<{ key: string; fence: number }>,
  ): Promise<ReadonlyMap<string, number>> {
    const sent: Array<Promise<Map<string, number>>> = [];
    for (let i = 0; i < terms.length; i += this.#maxBatch) {
      sent.push(this.#store.releaseMany(holder, terms.slice(i, i + this.#maxBatch)));
    }
    const answers = await Promise.all(sent);
    return answers.length === 1 && answers[0] ? answers[0] : new Map(answers.flatMap((a) => [...a]));
  }

  #flushReleases(): void {
    const batches = [...this.#releases];
    this.#releases.clear();
    for (const [holder, terms] of batches) {
      for (let i = 0; i < terms.length; i += this.#maxBatch) {
        this.#sendReleases(holder, terms.slice(i, i + this.#maxBatch));
      }
    }
  }

  #sendReleases(holder: string, terms: Array<Pending<boolean>>): void {
    const [only] = terms;
    if (terms.length === 1 && only) {
      this.#store.release(only.key, holder, only.fence).then(only.resolve, only.reject);
      return;
    }
    this.#store.releaseMany(holder, terms).then(
      (released) => {
        for (const term of terms) term.resolve(released.get(term.key) === term.fence);
      },
      (error: unknown) => {
        for (const term of terms) term.reject(error);
      },
    );
  }

  read(key: string): Promise<LeaseView | null> {
    return this.#store.read(key);
  }

  renew(key: string, holder: string, fence: number, durationMs: number): Promise<RenewAnswer> {
    return new Promise((resolve, reject) => {
      const group = `${durationMs}\u0000${holder}`;
      let batch = this.#pending.get(group);
      if (!batch) {
        batch = { holder, durationMs, terms: [] };
        this.#pending.set(group, batch);
      }
      batch.terms.push({ key, fence, resolve, reject });
      if (!this.#scheduled) {
        this.#scheduled = true;
        this.#clock.setTimer(this.#windowMs, () => this.#flush());
      }
    });
  }

  #flush(): void {
    this.#scheduled = false;
    const batches = [...this.#pending.values()];
    this.#pending.clear();
    for (const { holder, durationMs, terms } of batches) {
      for (let i = 0; i < terms.length; i += this.#maxBatch) {
        this.#send(holder, durationMs, terms.slice(i, i + this.#maxBatch));
      }
    }
  }

  #send(holder: string, durationMs: number, terms: Pending[]): void {
    const [only] = terms;
    // One term alone takes the single-row statement, which is prepared and cheaper.
    if (terms.length === 1 && only) {
      this.#store.renew(only.key, holder, only.fence, durationMs).then(only.resolve, only.reject);
      return;
    }
    this.#store.renewMany(holder, terms, durationMs).then(
      (renewed) => {
        for (const term of terms) {
          const answer = renewed.get(term.key);
          term.resolve(
            answer?.fence === term.fence
              ? { renewed: true, expiresAt: answer.expiresAt, ttlMs: answer.ttlMs }
              : { renewed: false },
          );
        }
      },
      (error: unknown) => {
        for (const term of terms) term.reject(error);
      },
    );
  }
}
