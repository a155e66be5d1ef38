// A lease store that passes every call to a real one, and can hold a call's answer until the
// test lets it through. PostgreSQL still runs, commits and answers every statement at once;
// only the answer's arrival at the elector waits, which is what a slow link, a stalled event
// loop or a reply stuck behind other traffic looks like from the elector. Never a made-up answer.
import type { ClaimAnswer, LeaseStore, LeaseView, RenewAnswer } from "../../../src/election/ports.ts";

export type StoreCall = "claim" | "renew" | "release" | "read";

interface Held {
  call: StoreCall;
  /** Settles once PostgreSQL has answered (the answer itself stays held). */
  answered: Promise<void>;
  letThrough: () => void;
}

export class HoldingStore implements LeaseStore {
  /** Calls made, and calls whose answer (or error) reached the caller. */
  readonly calls: Record<StoreCall, number> = { claim: 0, renew: 0, release: 0, read: 0 };
  readonly answers: Record<StoreCall, number> = { claim: 0, renew: 0, release: 0, read: 0 };
  readonly #inner: LeaseStore;
  readonly #holding = new Set<StoreCall>();
  #held: Held[] = [];

  constructor(inner: LeaseStore) {
    this.#inner = inner;
  }

  /** From now on, answers of these calls wait for deliver(). */
  hold(...calls: StoreCall[]): void {
    for (const call of calls) this.#holding.add(call);
  }

  /** Stops holding new calls; answers held already wait for deliver() all the same. */
  pass(...calls: StoreCall[]): void {
    for (const call of calls) this.#holding.delete(call);
  }

  /** Every call made so far has been answered, or is held. */
  quiet(): boolean {
    return (Object.keys(this.calls) as StoreCall[]).every(
      (call) => this.calls[call] === this.answers[call] + this.held(call),
    );
  }

  held(call: StoreCall): number {
    return this.#held.filter((h) => h.call === call).length;
  }

  /** Resolves once PostgreSQL has answered the oldest held call of this kind. */
  async answered(call: StoreCall): Promise<void> {
    await this.#oldest(call).answered;
  }

  /** Lets the oldest held answer of this kind through, once PostgreSQL has given it. */
  async deliver(call: StoreCall): Promise<void> {
    const held = this.#oldest(call);
    await held.answered;
    this.#held.splice(this.#held.indexOf(held), 1);
    held.letThrough();
  }

  /** Lets every held answer through (test cleanup). */
  deliverAll(): void {
    for (const held of this.#held.splice(0)) held.letThrough();
    this.#holding.clear();
  }

  #oldest(call: StoreCall): Held {
    const held = this.#held.find((h) => h.call === call);
    if (!held) throw new Error(`no ${call} answer is held`);
    return held;
  }

  #through<T>(call: StoreCall, run: () => Promise<T>): Promise<T> {
    this.calls[call]++;
    const counted = (promise: Promise<T>) => {
      const count = () => {
        this.answers[call]++;
      };
      promise.then(count, count);
      return promise;
    };
    const result = run();
    if (!this.#holding.has(call)) return counted(result);
    let letThrough = () => {};
    const gate = new Promise<void>((resolve) => {
      letThrough = resolve;
    });
    this.#held.push({ call, answered: result.then(noop, noop), letThrough });
    return counted(gate.then(() => result));
  }

  claim(key: string, holder: string, durationMs: number): Promise<ClaimAnswer> {
    return this.#through("claim", () => this.#inner.claim(key, holder, durationMs));
  }

  renew(key: string, holder: string, fence: number, durationMs: number): Promise<RenewAnswer> {
    return this.#through("renew", () => this.#inner.renew(key, holder, fence, durationMs));
  }

  release(key: string, holder: string, fence: number): Promise<boolean> {
    return this.#through("release", () => this.#inner.release(key, holder, fence));
  }

  read(key: string): Promise<LeaseView | null> {
    return this.#through("read", () => this.#inner.read(key));
  }
}

const noop = () => {};
