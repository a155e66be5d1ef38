// Claims and renews the store has not answered in time. The call gave up, the statement may
// not have: it can still commit until the server's own statement timeout (equal to the call
// timeout) ends it. So the store's own promises are kept and waited for, bounded, before the
// elector acts on a lease those writes could still change.
import { settledWithin, valueWithin } from "./bounded.ts";
import type { Clock } from "./clock.ts";
import type { ClaimAnswer } from "./ports.ts";

/** Network and commit time on top of the call timeout, after which a write can no longer commit. */
const SLACK_MS = 1_000;

export class UnansweredWrites {
  readonly #clock: Clock;
  readonly #boundMs: number;
  readonly #unsettled = new Set<Promise<unknown>>();
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

  /** Runs a renew through `call` (which bounds it), keeping the store's own promise until it settles. */
  write<T>(operation: Promise<T>, call: (operation: Promise<T>) => Promise<T>): Promise<T> {
    this.#unsettled.add(operation);
    const forget = () => this.#unsettled.delete(operation);
    operation.then(forget, forget);
    return call(operation).catch((error: unknown) => {
      this.#any = true;
      throw error;
    });
  }

  /** The same for a claim, which is also remembered for settleClaim() when it goes unanswered. */
  claim(
    operation: Promise<ClaimAnswer>,
    call: (o: Promise<ClaimAnswer>) => Promise<ClaimAnswer>,
  ): Promise<ClaimAnswer> {
    return this.write(operation, call).catch((error: unknown) => {
      this.#claim = operation;
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

  /** Resolves when every write has settled, or once none of them can still commit. */
  settled(): Promise<void> {
    return settledWithin(this.#clock, this.#boundMs, Promise.allSettled([...this.#unsettled]));
  }
}
