// The election's state and the shape of its decisions, shared by decide.ts (what happens next)
// and endings.ts (how a term ends or is refused). Times are on the elector's monotonic clock.
import type { Timing } from "./timing.ts";

export type Outcome =
  | "acquired"
  | "renewed"
  | "held-by-other"
  | "lost"
  | "stepped-down"
  | "released"
  /** A leader whose campaign gate closed handed its term over: work ended, pod demoted, released. */
  | "resigned"
  /** A follower whose campaign gate is closed looked and did not claim. */
  | "not-campaigning"
  /** A claim won a term this elector will not lead (answered too late, stale fence, stopping); it releases it. */
  | "refused"
  | "transient-error";

export interface Term {
  fence: number;
  acquiredAt: Date;
  expiresAt: Date;
  /** Local end of leadership: send time of the last good claim/renew + its ttl − the margin. */
  deadline: number;
}

export interface Observed {
  holder: string | null;
  fence: number | null;
  expiresAt: Date | null;
  /** Local instant by which the server's expiry has certainly passed; null when unknown. */
  localExpiry: number | null;
}

export interface ElectionState {
  role: "leader" | "follower";
  term: Term | null;
  observed: Observed | null;
}

export interface Decision {
  outcome: Outcome;
  sentence: string;
  state: ElectionState;
  /** Monotonic instant of the next tick. */
  wakeAt: number;
  /** The fence of a term won but refused: the elector releases that term (scoped to its fence). */
  release?: number;
  /** On a won claim, how the lease changed hands, in the history table's words (when the store says). */
  change?: { reason: string; previousHolder: string | null };
}

export interface Context {
  key: string;
  holder: string;
  timing: Timing;
  /**
   * Session takeover: this holder's term may be taken once its server session is gone, which its
   * last renew proved alive only then; leadership then ends locally one renew interval plus one
   * call timeout after that renew was sent, whatever the lease's ttl.
   */
  sessionTakeover?: boolean;
  /**
   * Release notices are known to arrive (the feed's connection is up and answered its last check):
   * a follower then waits for a notice or the observed expiry instead of polling.
   */
  noticesHealthy?: boolean;
}

export type Action = "renew" | "claim" | "read" | "resign";

export const initialState: ElectionState = { role: "follower", term: null, observed: null };

export const seconds = (ms: number) => `${(ms / 1000).toFixed(1)}s`;
