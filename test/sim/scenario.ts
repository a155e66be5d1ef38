// A schedule's shape, drawn from its seed: how many processes and keys, the election timing, the
// model's switches, and the fault list. Short on purpose (2–3 processes, 1–2 keys, well under a
// simulated minute) so CI explores a hundred thousand of them.
import { type Timing, timingOrThrow } from "../../src/election/timing.ts";
import type { ViolationKind } from "./checker.ts";
import { drawFaults, type Family, type Fault, healsAtMs } from "./faults.ts";
import type { Semantics } from "./lease-statements.ts";
import { Rng } from "./prng.ts";

export interface SimOptions {
  families: ReadonlySet<Family>;
  sem: Semantics;
  /** Lease connections carry statement_timeout = the call timeout (the fix); off today. */
  serverTimeout: boolean;
  /** Invariants not judged, to see what a known hole leads to (e.g. expiry-backwards to two-leaders). */
  ignore: readonly ViolationKind[];
  /** A restart lock that a live process does not keep from the next one: what its exclusivity buys. */
  restartLockNotExclusive?: boolean;
  /** Electors not given their process's campaign gate: what the gate buys under the "unfit" fault. */
  campaignGateIgnored?: boolean;
  /**
   * Each process's monotonic clock runs at a rate drawn within this many ppm of the server's
   * clock (default CLOCK_RATE_BOUND_PPM; 0: every clock at one rate).
   */
  clockRatePpm?: number;
}

/**
 * The rate bound the simulation draws within. A leader believes for ttl − margin on its own clock,
 * so its belief outlasts the server's term once its clock runs slower than 1 − margin/lease: the
 * README's assumption. Every schedule's margin is a third of its lease; this is 90 % of that, far
 * beyond the 500 ppm NTP allows. See test/sim/README.md.
 */
export const CLOCK_RATE_BOUND_PPM = 300_000;

export interface Scenario {
  seed: number;
  slots: number;
  keys: string[];
  /** Slots 0 and 1 run with the same holder (two campaigns sharing a term: family "shared-holder"). */
  sharedHolder: boolean;
  /** Every process runs with session takeover (family "session-takeover"). */
  sessionTakeover: boolean;
  /** Every process runs with crash takeover (family "crash-takeover"). */
  crashTakeover: boolean;
  timing: Timing;
  stopTimeoutMs: number;
  workIntervalMs: number;
  faults: Fault[];
  livenessBoundMs: number;
  /** The bound of every process's clock rate, ppm off the server's. */
  clockRatePpm: number;
}

export function makeScenario(seed: number, options: SimOptions): Scenario {
  const rng = Rng.stream(seed, "scenario");
  const slots = rng.int(2, 3);
  const keys = rng.chance(0.3) ? ["a", "b"] : ["a"];
  const leaseDurationMs = rng.pick([2_000, 3_000, 3_000, 6_000]);
  const timing = timingOrThrow({
    leaseDurationMs,
    retryIntervalMs: rng.pick([250, 500, 1_000, 2_000]),
  });
  const sharedHolder = options.families.has("shared-holder") && rng.chance(0.5);
  const clockRatePpm = options.clockRatePpm ?? CLOCK_RATE_BOUND_PPM;
  const faults = drawFaults(Rng.stream(seed, "faults"), {
    slots,
    keys,
    families: options.families,
    windowMs: 3 * leaseDurationMs,
  });
  return {
    seed,
    slots,
    keys,
    sharedHolder,
    sessionTakeover: options.families.has("session-takeover"),
    crashTakeover: options.families.has("crash-takeover"),
    timing,
    stopTimeoutMs: 1_000,
    // Off the round numbers the deadlines fall on, so a write rarely ties with the deadline timer.
    workIntervalMs: rng.pick([250, 500]) + 0.037,
    faults,
    // A dead leader's lease runs out, then a follower's poll or its wake-up at the observed expiry
    // claims it; one renew interval of slack. A follower waits on its own clock: a slow one, longer.
    livenessBoundMs: Math.ceil(
      (timing.leaseDurationMs + timing.retryIntervalMs + timing.renewIntervalMs) / (1 - clockRatePpm / 1e6),
    ),
    clockRatePpm,
  };
}

/** The longest a stop() takes: the call in flight, the work's bounded wait, the release. */
export function stopBudgetMs(scenario: Scenario): number {
  return scenario.stopTimeoutMs + 2 * scenario.timing.callTimeoutMs;
}

/** The instant every kept fault has healed, ms. */
export function healMs(scenario: Scenario, faults: readonly Fault[]): number {
  return faults.reduce((max, f) => Math.max(max, healsAtMs(f, stopBudgetMs(scenario))), 0);
}
