// What /healthz and /readyz answer, as plain functions of what the sidecar knows: the probes'
// rules in one place, each answer a sentence (null when healthy or ready).
import type { Elector } from "../election/elector.ts";
import type { Timing } from "../election/timing.ts";

export interface HealthView {
  /** Null until the lease stack is open: the sidecar is still starting. */
  electors: readonly Elector[] | null;
  /** Monotonic time of each lease's last election tick. */
  lastTick: Map<string, number>;
  /** Monotonic time the electors started. */
  campaigningSince: number;
  /** Null when the pod is not published to (outside a cluster). */
  podShown: boolean | null;
  /** Set the first time the sidecar was ready; it stays ready from then on. */
  readyOnce: boolean;
  /**
   * The electors were stopped on purpose (the pod is being deleted, or a SIGTERM): no tick is due
   * any more, and a sidecar waiting for its SIGTERM (a native sidecar's comes after the
   * application's containers exited) is not stuck.
   */
  campaignEnded: boolean;
}

/** A loop that has not ticked in three intervals and a call timeout is stuck: liveness fails. */
export function stallBound(timing: Timing): number {
  return 3 * Math.max(timing.renewIntervalMs, timing.retryIntervalMs) + timing.callTimeoutMs;
}

/** Liveness: only a stuck election loop fails it; starting (waiting for PostgreSQL) is alive. */
export function stalledReason(view: HealthView, stallAfterMs: number, now: number): string | null {
  if (view.electors === null || view.campaignEnded) return null;
  const late = view.electors.filter(
    (e) => now - (view.lastTick.get(e.key) ?? view.campaigningSince) > stallAfterMs,
  );
  return late.length > 0
    ? `no election tick for ${late.map((e) => e.key).join(", ")} in ${stallAfterMs} ms`
    : null;
}

/**
 * Readiness gates only the start: the lease store answered every lease once and the pod shows its
 * role. After that the sidecar stays ready, through a lease-database outage too: readiness is
 * the whole pod's (every container's), and an outage must not take followers or a healthy
 * application out of their Services. Leadership itself is shown by the label and condition,
 * which an outage does change (the leader steps down at its deadline).
 */
export function notReadyReason(view: HealthView): string | null {
  if (view.readyOnce) return null;
  if (view.electors === null) return "starting: the lease store is not open yet";
  const unanswered = view.electors.filter((e) => {
    const outcome = e.status().lastOutcome;
    return outcome === null || outcome === "transient-error";
  });
  if (unanswered.length > 0)
    return `starting: the lease store has not answered yet for ${unanswered.map((e) => e.key).join(", ")}`;
  if (view.podShown === false) return "starting: the pod has not shown its role yet";
  view.readyOnce = true;
  return null;
}
