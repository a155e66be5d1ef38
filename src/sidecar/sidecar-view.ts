// What the sidecar knows of its electors and its pod, with one owner: the campaign writes it (the
// electors, each tick, each accepted claim or renew of the published lease), the publisher marks
// the pod shown; the probes (/healthz, /readyz: their rules are here, each answer a sentence, null
// when healthy or ready), the health gate and the publisher read it.
import type { AnnounceAnswer } from "../candidacy/candidacy.ts";
import type { Elector, TickReport } from "../election/elector.ts";
import type { Timing } from "../election/timing.ts";
import type { LeadershipState } from "../kube/desired-state.ts";

/** A loop that has not ticked in three intervals and a call timeout is stuck: liveness fails. */
export function stallBound(timing: Timing): number {
  return 3 * Math.max(timing.renewIntervalMs, timing.retryIntervalMs) + timing.callTimeoutMs;
}

export class SidecarView {
  /** How long readiness waits at most for a candidacy announcement that keeps failing (one lease duration). */
  readonly #candidacyWaitMs: number;
  /** Null until the lease stack is open: the sidecar is still starting. */
  #electors: readonly Elector[] | null = null;
  /** Monotonic time of each lease's last election tick. */
  readonly #lastTick = new Map<string, number>();
  /** Monotonic time the electors started. */
  #campaigningSince = 0;
  /** Null when the pod is not published to (outside a cluster). */
  #podShown: boolean | null = null;
  /** Set the first time the sidecar was ready; it stays ready from then on. */
  #readyOnce = false;
  /** Per published lease, the fence of this process's current term and how many of its claims and renews succeeded. */
  readonly #renewals = new Map<string, { fence: number; count: number }>();
  /**
   * The electors were stopped on purpose (the pod is being deleted, or a SIGTERM): no tick is due
   * any more, and a sidecar waiting for its SIGTERM (a native sidecar's comes after the
   * application's containers exited) is not stuck.
   */
  #campaignEnded = false;
  /** The first announcement that settled this process's candidacy (stored, or refused for good); null before. */
  #candidacy: "recorded" | "refused" | null = null;
  /** The last announcement failed, transiently: its next try is due after a retry interval. */
  #candidacyFailed = false;

  constructor({ candidacyWaitMs }: { candidacyWaitMs: number }) {
    this.#candidacyWaitMs = candidacyWaitMs;
  }

  /** The lease stack is open; with publishing on, the pod has still to show its role. */
  opened(publishing: boolean): void {
    this.#podShown = publishing ? false : null;
  }

  /** The pod shows its role (the publisher's start, or a publish that landed). */
  podShown(): void {
    this.#podShown = true;
  }

  /** An answer to this process's candidacy announcement (the rows a stopping leader picks its successor from). */
  announced(answer: AnnounceAnswer): void {
    if (answer === "failed") this.#candidacyFailed = true;
    else this.#candidacy ??= answer;
  }

  /** The electors start campaigning now. */
  campaigning(electors: readonly Elector[], now: number): void {
    this.#campaigningSince = now;
    this.#electors = electors;
  }

  /** The electors are being stopped on purpose: no tick is due any more. */
  campaignEnded(): void {
    this.#campaignEnded = true;
  }

  /** An election tick of `key`, at monotonic time `now`. */
  ticked(key: string, now: number): void {
    this.#lastTick.set(key, now);
  }

  /**
   * A tick of the published lease: an accepted claim or renew counts toward its term. Counted
   * before the transition's publish runs: the publisher's stale-fence proof reads it.
   */
  countRenewal(tick: TickReport): void {
    const fence = tick.state.term?.fence;
    if (fence === undefined || (tick.outcome !== "acquired" && tick.outcome !== "renewed")) return;
    const previous = this.#renewals.get(tick.key);
    this.#renewals.set(tick.key, { fence, count: previous?.fence === fence ? previous.count + 1 : 1 });
  }

  /** Empty while the sidecar is starting. */
  electors(): readonly Elector[] {
    return this.#electors ?? [];
  }

  leadsAny(): boolean {
    return this.electors().some((e) => e.isLeader());
  }

  /** Whether `term` is still this process's current term (asked by the publisher). */
  stillLeads(term: LeadershipState): boolean {
    const elector = this.#electors?.find((e) => e.key === term.lease);
    return elector?.isLeader() === true && elector.status().fence === term.fence;
  }

  /** How many claims and renews of `term` succeeded; null when it is not this process's term. */
  renewals(term: LeadershipState): number | null {
    const confirmed = this.#renewals.get(term.lease);
    return confirmed !== undefined && confirmed.fence === term.fence ? confirmed.count : null;
  }

  /** Liveness: only a stuck election loop fails it; starting (waiting for PostgreSQL) is alive. */
  stalled(stallAfterMs: number, now: number): string | null {
    if (this.#electors === null || this.#campaignEnded) return null;
    const late = this.#electors.filter(
      (e) => now - (this.#lastTick.get(e.key) ?? this.#campaigningSince) > stallAfterMs,
    );
    return late.length > 0
      ? `no election tick for ${late.map((e) => e.key).join(", ")} in ${stallAfterMs} ms`
      : null;
  }

  /**
   * Readiness gates only the start: the lease store answered every lease once, the pod shows its
   * role, and this process is recorded as a candidate. After that the sidecar stays ready, through a
   * lease-database outage too: readiness is the whole pod's (every container's), and an outage must
   * not take followers or a healthy application out of their Services. Leadership itself is shown
   * by the label and condition, which an outage does change (the leader steps down at its deadline).
   *
   * The candidacy because a Deployment deletes an old pod once a new one is ready: the old leader
   * then reserves its lease for the best live candidate of the candidates table, which must
   * already show the new pod (or leadership goes to another old pod, and moves again). A role
   * refused the table's privileges is warned about and not waited for; an announcement that keeps
   * failing (tried again every retry interval) is waited for at most `candidacyWaitMs` after the
   * campaign began, so a database hiccup at start does not hold a rollout.
   */
  notReady(now: number): string | null {
    if (this.#readyOnce) return null;
    if (this.#electors === null) return "starting: the lease store is not open yet";
    const unanswered = this.#electors.filter((e) => {
      const outcome = e.status().lastOutcome;
      return outcome === null || outcome === "transient-error";
    });
    if (unanswered.length > 0)
      return `starting: the lease store has not answered yet for ${unanswered.map((e) => e.key).join(", ")}`;
    if (this.#podShown === false) return "starting: the pod has not shown its role yet";
    if (this.#candidacy === null && now - this.#campaigningSince < this.#candidacyWaitMs) {
      return this.#candidacyFailed
        ? `starting: not yet recorded as a candidate (its last try failed; ready without it ${this.#candidacyWaitMs} ms after the campaign began)`
        : "starting: not yet recorded as a candidate (a stopping leader picks its successor among the candidates)";
    }
    this.#readyOnce = true;
    return null;
  }
}
