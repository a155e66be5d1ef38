// Claims and renews the store has not answered. A call that gave up (its timeout) or failed
// (a broken connection) may have left its statement running on the server, where it can still
// commit until the server's own statement timeout (at most the call timeout) ends it. So each
// write is kept until it is answered or can no longer commit, and waited for, bounded, before the
// elector acts on a lease those writes could still change.

import type { Clock } from "../shared/clock.ts";
import { valueWithin } from "./bounded.ts";
import type { ClaimAnswer } from "./ports.ts";

/** Network and commit time on top of the call timeout, after which a write can no longer commit. */
const SLACK_MS = 1_000;

/** The store dropped the statement before it reached the server (postgres/store.ts StatementNotSent). */
const neverSent = (error: unknown) =>
  typeof error === "object" && error !== null && (error as { notSent?: unknown }).notSent === true;

interface Write {
  operation: Promise<unknown>;
  /** Past this instant (the elector's clock) the statement can no longer commit. */
  settledBy: number;
}

export class UnansweredWrites {
  readonly #clock: Clock;
  readonly #boundMs: number;
  /** Writes not answered yet, and failed ones until their settledBy. */
  readonly #open = new Set<Write>();
  #claim: Promise<ClaimAnswer> | null = null;
  #any = false;

  constructor(clock: Clock, callTimeoutMs: number) {
    this.#clock = clock;
    this.#boundMs = callTimeoutMs + SLACK_MS;
  }

  /** Some claim or renew went unanswered: a row in this holder's name may be nobody's term. */
  get any(): boolean {
    return this.#any;
  }

  /** Runs a renew through `call` (which bounds it), keeping the write until it is answered or can no longer commit. */
  write<T>(operation: Promise<T>, call: (operation: Promise<T>) => Promise<T>): Promise<T> {
    const now = this.#clock.now();
    this.#forgetSettled(now);
    const write: Write = { operation, settledBy: now + this.#boundMs };
    this.#open.add(write);
    // Only an answer proves the statement is over; a failure may have come from the link alone.
    operation.then(
      () => this.#open.delete(write),
      (error: unknown) => {
        if (neverSent(error)) this.#open.delete(write);
      },
    );
    return call(operation).catch((error: unknown) => {
      if (!neverSent(error)) this.#any = true;
      throw error;
    });
  }

  /** The same for a claim, which is also remembered for settleClaim() when it goes unanswered. */
  claim(
    operation: Promise<ClaimAnswer>,
    call: (o: Promise<ClaimAnswer>) => Promise<ClaimAnswer>,
  ): Promise<ClaimAnswer> {
    return this.write(operation, call).catch((error: unknown) => {
      if (!neverSent(error)) this.#claim = operation;
      throw error;
    });
  }

  /** A claim went unanswered and has not been settled yet. */
  get claimPending(): boolean {
    return this.#claim !== null;
  }

  /** The last unanswered claim's late answer, awaited (bounded) once; undefined if none, failed or still pending. */
  async settleClaim(): Promise<ClaimAnswer | undefined> {
    const claim = this.#claim;
    if (!claim) return undefined;
    this.#claim = null;
    return valueWithin(this.#clock, this.#boundMs, claim);
  }

  /** Some write is neither answered nor past the instant it could still commit: settled() would wait. */
  get unsettled(): boolean {
    this.#forgetSettled(this.#clock.now());
    return this.#open.size > 0;
  }

  /** Resolves when every write has been answered, or can no longer commit. */
  async settled(): Promise<void> {
    const now = this.#clock.now();
    this.#forgetSettled(now);
    const waits = [...this.#open].map(
      (write) =>
        new Promise<void>((resolve) => {
          const timer = this.#clock.setTimer(write.settledBy - now, resolve);
          write.operation.then(
            () => {
              timer.cancel();
              resolve();
            },
            () => {},
          );
        }),
    );
    await Promise.all(waits);
  }

  #forgetSettled(now: number): void {
    for (const old of this.#open) if (old.settledBy <= now) this.#open.delete(old);
  }
}
