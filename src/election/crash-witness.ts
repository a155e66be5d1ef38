// Crash takeover (docs/guarantees.md#crash-takeover-on-the-kubelets-report): the set of holders
// a witness outside the database (the kubelet, through the pod API) has reported dead. It lives in
// src/election because the elector and the store both only need its shape: which holders, and
// when that set grew. The Kubernetes side that fills it is src/kube/crash-report.ts.
import { RESTART_PROOF_MARKER } from "./identity.ts";

export interface CrashWitness {
  /** The holders reported dead, each carrying a restart proof (one process, never reused). */
  dead(): readonly string[];
  /** Called each time a holder is added to dead(); answers the unsubscriber. */
  subscribe(listener: () => void): () => void;
}

const MAX_DEAD = 32;
/** Holders ever reported, so one let go is not taken back: the statuses keep showing old reports. */
const MAX_REPORTED = 1024;

/** A witness fed by its owner: add() a holder reported dead. */
export class WitnessedCrashes implements CrashWitness {
  readonly #dead = new Set<string>();
  readonly #reported = new Set<string>();
  readonly #listeners = new Set<() => void>();

  dead(): readonly string[] {
    return [...this.#dead];
  }

  /**
   * A holder without a restart proof is refused: only a proof (the lock's token and the instant it
   * was bound) names one process; a holder chosen by hand may be the next process's name too.
   */
  add(holder: string): boolean {
    if (!holder.includes(RESTART_PROOF_MARKER) || this.#reported.has(holder)) return false;
    this.#reported.add(holder);
    if (this.#reported.size > MAX_REPORTED)
      this.#reported.delete(this.#reported.values().next().value as string);
    this.#dead.add(holder);
    // Each claim sends the set: the oldest (long expired by now) go first, so it stays one packet.
    if (this.#dead.size > MAX_DEAD) this.#dead.delete(this.#dead.values().next().value as string);
    for (const listener of [...this.#listeners]) listener();
    return true;
  }

  subscribe(listener: () => void): () => void {
    this.#listeners.add(listener);
    return () => this.#listeners.delete(listener);
  }
}
