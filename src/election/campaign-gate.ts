// Whether this process may lead now. The elector asks before every claim and at every renew: a
// follower that may not lead only reads (it still knows who leads); a leader that may not lead
// hands over as stop() does (work aborted and awaited, beforeRelease, release), and stays a
// follower that does not claim until the gate opens again. Policies (a grace period, hysteresis,
// "only when a healthy candidate exists") belong to whoever answers, not to the elector.

/** The elector's view of a gate: see ElectorOptions.campaign. */
export interface CampaignGate {
  /** Null while this process may lead; otherwise why not, in a few words (the log line's reason). */
  reasonNotToLead(): string | null;
  /** Calls `changed` whenever the answer may have changed, so the elector acts at once. */
  subscribe(changed: () => void): () => void;
}

/** A gate the application opens and closes itself: `campaign.unfit("draining")`, `campaign.fit()`. */
export class CampaignSwitch implements CampaignGate {
  #reason: string | null;
  readonly #listeners = new Set<() => void>();

  /** Open unless given the reason it starts closed. */
  constructor(reasonNotToLead: string | null = null) {
    this.#reason = reasonNotToLead;
  }

  fit(): void {
    this.#set(null);
  }

  unfit(reason: string): void {
    if (!reason) throw new TypeError("unfit() needs a reason: it is the log line's and the status's words");
    this.#set(reason);
  }

  reasonNotToLead(): string | null {
    return this.#reason;
  }

  subscribe(changed: () => void): () => void {
    this.#listeners.add(changed);
    return () => this.#listeners.delete(changed);
  }

  #set(reason: string | null): void {
    if (reason === this.#reason) return;
    this.#reason = reason;
    for (const listener of [...this.#listeners]) listener();
  }
}
