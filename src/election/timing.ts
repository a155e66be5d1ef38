// Election timing. Rejected when inconsistent, never adjusted: a silently "fixed" setting
// is a leadership guarantee nobody asked for.

export interface Timing {
  /** How long a claim or renew keeps the lease on the server. */
  leaseDurationMs: number;
  /** How often the leader renews. */
  renewIntervalMs: number;
  /** How often a follower looks at the lease. */
  retryIntervalMs: number;
  /** How long before the earliest server-side expiry the leader gives up locally. */
  safetyMarginMs: number;
  /** Pause between attempts after a transient failure (network, timeout). */
  transientRetryMs: number;
  /** Longest a single store call may take before it counts as a transient failure. */
  callTimeoutMs: number;
}

export const DEFAULT_LEASE_DURATION_MS = 15_000;
export const DEFAULT_RETRY_INTERVAL_MS = 2_000;

export type TimingInput = Partial<Timing>;

declare const resolved: unique symbol;
/**
 * Timing that resolveTiming() filled and found consistent, and nothing else: only this file makes
 * one, so whoever holds one knows it was checked. Resolved once where settings enter the election
 * (Leases.campaign(), new Elector()) and passed on as is: to the candidacy, the elector, decide.ts.
 */
export type ResolvedTiming = Readonly<Timing> & { readonly [resolved]: true };

export type TimingResolution =
  | { valid: true; timing: ResolvedTiming; problems: [] }
  /** The filled values (for cross-checks of other settings) and every inconsistency. */
  | { valid: false; timing: Timing; problems: string[] };

/** Fills defaults derived from the lease duration, then lists every inconsistency at once. */
export function resolveTiming(
  input: TimingInput = {},
  /** How each setting is called where the user wrote it (a CLI flag, say). */
  name: (field: keyof Timing) => string = (field) => field,
): TimingResolution {
  const leaseDurationMs = input.leaseDurationMs ?? DEFAULT_LEASE_DURATION_MS;
  const renewIntervalMs = input.renewIntervalMs ?? Math.floor(leaseDurationMs / 3);
  const timing: Timing = {
    leaseDurationMs,
    renewIntervalMs,
    retryIntervalMs: input.retryIntervalMs ?? DEFAULT_RETRY_INTERVAL_MS,
    safetyMarginMs: input.safetyMarginMs ?? renewIntervalMs,
    transientRetryMs:
      input.transientRetryMs ?? Math.min(1_000, Math.max(10, Math.floor(renewIntervalMs / 5))),
    callTimeoutMs: input.callTimeoutMs ?? Math.floor(renewIntervalMs / 2),
  };
  const problems: string[] = [];
  for (const [field, value] of Object.entries(timing) as Array<[keyof Timing, number]>) {
    if (!Number.isSafeInteger(value) || value <= 0) {
      problems.push(`${name(field)} must be a positive whole number of milliseconds, got ${value}`);
    }
  }
  if (problems.length > 0) return { valid: false, timing, problems };
  if (timing.renewIntervalMs >= timing.leaseDurationMs) {
    problems.push(
      `${name("renewIntervalMs")} (${timing.renewIntervalMs} ms) must be shorter than ${name("leaseDurationMs")} (${timing.leaseDurationMs} ms); a third of it is usual`,
    );
  }
  if (timing.renewIntervalMs + timing.safetyMarginMs >= timing.leaseDurationMs) {
    problems.push(
      `${name("renewIntervalMs")} + ${name("safetyMarginMs")} (${timing.renewIntervalMs} + ${timing.safetyMarginMs} ms) must be shorter than ` +
        `${name("leaseDurationMs")} (${timing.leaseDurationMs} ms), or the leader would step down before its next renew`,
    );
  }
  if (timing.callTimeoutMs * 2 > timing.renewIntervalMs) {
    problems.push(
      `${name("callTimeoutMs")} (${timing.callTimeoutMs} ms) must be at most half of ${name("renewIntervalMs")} (${timing.renewIntervalMs} ms), so a hung call costs one tick`,
    );
  }
  if (timing.transientRetryMs >= timing.leaseDurationMs) {
    problems.push(
      `${name("transientRetryMs")} (${timing.transientRetryMs} ms) must be shorter than ${name("leaseDurationMs")} (${timing.leaseDurationMs} ms)`,
    );
  }
  if (problems.length > 0) return { valid: false, timing, problems };
  return { valid: true, timing: timing as ResolvedTiming, problems: [] };
}

export class TimingError extends Error {
  readonly problems: string[];
  constructor(problems: string[]) {
    super(`invalid election timing:\n  - ${problems.join("\n  - ")}`);
    this.name = "TimingError";
    this.problems = problems;
  }
}

export function timingOrThrow(input: TimingInput = {}): ResolvedTiming {
  const resolution = resolveTiming(input);
  if (!resolution.valid) throw new TimingError(resolution.problems);
  return resolution.timing;
}
