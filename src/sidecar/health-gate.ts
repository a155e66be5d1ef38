// Leadership follows the application's health. The gate (the elector's campaign gate, one view per
// lease) says, in order:
// 1. health not known yet: no campaign while the pod waits for its application (unless opted out);
// 2. unready, as a follower: no campaign;
// 3. unready, as a leader: keep leading through the grace period; then hand over, but only once a
//    healthy candidate is seen (a peer pod whose application and sidecar are up), so a fleet that is
//    all unhealthy keeps its leader; strict mode hands over without one;
// 4. ready again after a health handover: no campaign until ready for the settle period, so a
//    flapping application does not bounce leadership;
// 5. otherwise: campaign.
import type { CampaignGate } from "../election/campaign-gate.ts";
import { seconds } from "../election/decide.ts";
import type { Readiness } from "../kube/app-readiness.ts";
import type { Clock, Timer } from "../shared/clock.ts";

export interface HealthPolicy {
  graceMs: number;
  settleMs: number;
  /** Hand over after the grace period even when no healthy candidate is seen. */
  strict: boolean;
  /** Do not campaign until the application has been seen ready once. */
  waitAtStart: boolean;
}

export interface HealthGateDeps {
  clock: Clock;
  /** Whether this process leads any lease now: only a leader looks for a candidate. */
  leadsAny: () => boolean;
  /** A peer that could lead instead (its name), or null; throws when the peers cannot be listed. */
  healthyCandidate: () => Promise<string | null>;
  /** Why a due handover is held back, or that it goes ahead: one line each time it is decided. */
  log: (message: string) => void;
}

export interface AppHealthView {
  /** null until the first report. */
  ready: boolean | null;
  detail: string;
  /** Since the last change of `ready`, ms. */
  ageMs: number;
  /**
   * The leader hands over: unready past the grace period, a healthy candidate was seen, and this
   * process still leads (once the lease is released the handover is over).
   */
  handingOver: boolean;
  handovers: number;
}

export class HealthGate {
  readonly #policy: HealthPolicy;
  readonly #deps: HealthGateDeps;
  readonly #listeners = new Set<() => void>();
  #ready: boolean | null = null;
  #detail = "no report from the application yet";
  #since: number;
  #handingOver = false;
  /** A health handover happened: the next campaign waits for the settle period. */
  #settling = false;
  #timer: Timer | null = null;
  #handovers = 0;
  #stopped = false;

  constructor(policy: HealthPolicy, deps: HealthGateDeps) {
    this.#policy = policy;
    this.#deps = deps;
    this.#since = deps.clock.now();
  }

  /** The application's readiness as last seen (pod watch or probe); repeats are cheap. */
  report(readiness: Readiness): void {
    if (this.#stopped) return;
    this.#detail = readiness.detail;
    if (readiness.ready === this.#ready) return;
    this.#ready = readiness.ready;
    this.#since = this.#deps.clock.now();
    this.#timer?.cancel();
    this.#timer = null;
    this.#handingOver = false;
    if (readiness.ready && this.#settling) this.#after(this.#policy.settleMs, () => this.#settled());
    if (!readiness.ready) this.#after(this.#policy.graceMs, () => void this.#graceOver());
    this.#changed();
  }

  /** The campaign gate of one lease: `leads` says whether this process leads that lease now. */
  gateFor(leads: () => boolean): CampaignGate {
    return {
      reasonNotToLead: () => this.#reason(leads()),
      subscribe: (changed) => {
        this.#listeners.add(changed);
        return () => this.#listeners.delete(changed);
      },
    };
  }

  view(): AppHealthView {
    return {
      ready: this.#ready,
      detail: this.#detail,
      ageMs: this.#deps.clock.now() - this.#since,
      // The decision stays (a term won back while still unready is handed over at once); the view
      // shows it only while there is still a term to hand over.
      handingOver: this.#handingOver && this.#deps.leadsAny(),
      handovers: this.#handovers,
    };
  }

  stop(): void {
    this.#stopped = true;
    this.#timer?.cancel();
    this.#listeners.clear();
  }

  #reason(leading: boolean): string | null {
    const { graceMs, settleMs, waitAtStart } = this.#policy;
    if (this.#ready === null) return waitAtStart ? `application not ready yet (${this.#detail})` : null;
    if (!this.#ready) {
      if (!leading) return `application unready (${this.#detail})`;
      return this.#handingOver
        ? `application unready for more than ${seconds(graceMs)} (${this.#detail})`
        : null;
    }
    if (this.#settling) {
      return `application ready for less than the ${seconds(settleMs)} settle period after a health handover`;
    }
    return null;
  }

  async #graceOver(): Promise<void> {
    const { graceMs, strict } = this.#policy;
    const since = this.#since;
    // A follower is out already (rule 2); it looks again in case a claim already out made it lead.
    if (!this.#deps.leadsAny()) return this.#after(graceMs, () => void this.#graceOver());
    let candidate: string | null = null;
    let why = "";
    try {
      candidate = await this.#deps.healthyCandidate();
      if (candidate === null) why = "no peer pod has a ready application";
    } catch (error) {
      why = `the peers could not be listed (${error instanceof Error ? error.message : String(error)})`;
    }
    // Stopped, the application recovered or changed again, or the term ended while the peers were listed.
    if (this.#stopped || this.#ready !== false || this.#since !== since) return;
    if (!this.#deps.leadsAny()) return this.#after(graceMs, () => void this.#graceOver());
    if (candidate === null && !strict) {
      this.#deps.log(
        `application unready for ${seconds(graceMs)}, keeping the lease: ${why}; looking again in ${seconds(graceMs)}`,
      );
      this.#after(graceMs, () => void this.#graceOver());
      return;
    }
    this.#deps.log(
      candidate === null
        ? `application unready for ${seconds(graceMs)}: handing over (strict: ${why})`
        : `application unready for ${seconds(graceMs)}: handing over, ${candidate} is a healthy candidate`,
    );
    this.#handingOver = true;
    this.#settling = true;
    this.#handovers++;
    this.#changed();
  }

  #settled(): void {
    this.#settling = false;
    this.#changed();
  }

  #after(ms: number, fire: () => void): void {
    this.#timer?.cancel();
    if (this.#stopped) return;
    this.#timer = this.#deps.clock.setTimer(ms, () => {
      this.#timer = null;
      fire();
    });
  }

  #changed(): void {
    for (const listener of [...this.#listeners]) listener();
  }
}
