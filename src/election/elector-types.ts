// What the elector takes and tells (elector.ts): its options, its status and its events. A
// throwing listener never breaks the election: the elector emits each event to every listener.

import type { Clock } from "../shared/clock.ts";
import type { CampaignGate } from "./campaign-gate.ts";
import type { Action, Decision, Outcome } from "./decide.ts";
import type { LeaseStore, ReleaseFeed } from "./ports.ts";
import type { ClockStepReport } from "./server-clock.ts";
import type { TimingInput } from "./timing.ts";

export interface LeaderTerm {
  key: string;
  holder: string;
  /** Strictly higher than the fence of every earlier lead() call of this elector. */
  fence: number;
  acquiredAt: Date;
  /** Aborted at the local deadline, on a lost renew and on stop: before anyone else can hold the lease. */
  signal: AbortSignal;
}

export interface ElectorOptions extends TimingInput {
  key: string;
  /** Unique per process: see holderIdentity(). */
  holder: string;
  store: LeaseStore;
  releases?: ReleaseFeed;
  clock?: Clock;
  /**
   * Leader-only work, started on each acquisition with the fence and a signal; started only
   * once the previous term's work has returned, or stopTimeoutMs after it was aborted.
   */
  lead?: (term: LeaderTerm) => unknown;
  /** Awaited (bounded) before a graceful release: demote the pod first, so there is a gap, never an overlap. */
  beforeRelease?: (term: { key: string; fence: number; reason: string }) => Promise<unknown>;
  /** Bound on waiting for leader work, and for beforeRelease, when stopping or starting a new term. */
  stopTimeoutMs?: number;
  /**
   * The store records this process's notice session with its claims, and the term may be taken once
   * that session is gone: leadership then ends locally a renew interval plus a call timeout after
   * the last good renew was sent. Only together with a store that records the session and
   * `releases` that report its loss (subscribeSessionLost; refused otherwise): use
   * openLeases({ sessionTakeover }), which sets both.
   */
  sessionTakeover?: boolean;
  /**
   * Whether this process may lead now (the application's health, a drain, a no-lead mode). While
   * it says no, a follower claims nothing and a leader hands over as stop() would, then stays a
   * follower. Without it the elector always campaigns. See CampaignSwitch for a simple one.
   */
  campaign?: CampaignGate;
}

export interface TickReport extends Decision {
  key: string;
  /** "deadline" and "session-lost" end a term locally, without a store call. */
  action: Action | "deadline" | "release" | "session-lost";
  /** How long the store call took, in ms (0 for the deadline timer). */
  durationMs: number;
}

export interface LeaderSeen {
  key: string;
  holder: string | null;
  fence: number | null;
}

export interface ElectorStatus {
  key: string;
  holder: string;
  role: "leader" | "follower";
  /** The fence of this process's own term; null unless it leads. Hand only this one to writes. */
  fence: number | null;
  leader: string | null;
  /** The fence of whoever leads, as far as this process knows (its own when it leads). */
  leaderFence: number | null;
  expiresAt: Date | null;
  lastOutcome: Outcome | null;
  since: Date;
  /** Local time left before this leader steps down on its own, ms; null for a follower. */
  deadlineInMs: number | null;
  /** Why this process does not campaign now (its campaign gate is closed); null while it does. */
  notCampaigning: string | null;
}

export type ElectorEvents = {
  tick: [TickReport];
  transition: [TickReport];
  "leader-changed": [LeaderSeen];
  "work-error": [unknown];
  /** The database server's clock stepped against this process's monotonic clock. */
  "clock-step": [ClockStepReport];
  /** Each answer's server time (ms since the epoch) and its round trip on the elector's clock. */
  "server-time": [{ serverNowMs: number; roundTripMs: number }];
  /** A listener of another event threw; the election went on. */
  "listener-error": [error: unknown, event: string];
};
