// The releases of electors stopping together (stopElectors, elector.ts). Each elector ends its
// term here first, then hands its fence in; every fence handed in before the batch's turn is over
// goes out in one releaseMany per holder, so 10,000 leases cost one statement, not 10,000 promises,
// timers and rows of their own. One answer serves every elector of that statement.
import type { Clock } from "../shared/clock.ts";
import { withDeadline } from "./bounded.ts";
import type { ReleasesMany } from "./ports.ts";

/** A statement that failed, or got no answer within its bound. */
export interface Failure {
  error: unknown;
}

interface Statement {
  terms: Array<{ key: string; fence: number }>;
  boundMs: number;
  /** Settles with the statement: null once answered, else its failure. */
  outcome: Promise<Failure | null>;
  settle: (outcome: Failure | null) => void;
}

export class ReleaseBatch {
  readonly #store: ReleasesMany;
  readonly #clock: Clock;
  /** The statements of the current turn, by holder; sent when the turn is over. */
  #pending = new Map<string, Statement>();

  constructor(store: ReleasesMany, clock: Clock) {
    this.#store = store;
    this.#clock = clock;
  }

  /**
   * Joins the term to this turn's release of its holder's terms, bounded by the shortest call
   * timeout among them. Resolves when that statement is answered (null), or has failed or got no
   * answer in time (the terms then end at their expiry).
   */
  release(holder: string, key: string, fence: number, callTimeoutMs: number): Promise<Failure | null> {
    let statement = this.#pending.get(holder);
    if (!statement) {
      // The first term of a turn: a zero timer on the electors' own clock fires once it is over.
      if (this.#pending.size === 0) this.#clock.setTimer(0, () => this.#send());
      let settle: (outcome: Failure | null) => void = () => {};
      const outcome = new Promise<Failure | null>((resolve) => {
        settle = resolve;
      });
      statement = { terms: [], boundMs: callTimeoutMs, outcome, settle };
      this.#pending.set(holder, statement);
    }
    statement.terms.push({ key, fence });
    statement.boundMs = Math.min(statement.boundMs, callTimeoutMs);
    return statement.outcome;
  }

  #send(): void {
    const statements = [...this.#pending];
    this.#pending.clear();
    for (const [holder, { terms, boundMs, settle }] of statements) {
      // Each row scoped to its own term's fence: harmless for a term that already ended.
      withDeadline(this.#clock, boundMs, this.#store.releaseMany(holder, terms)).then(
        () => settle(null),
        (error: unknown) => settle({ error }),
      );
    }
  }
}
