// What an elector's store calls and its stop path share with the elector itself: its identity,
// clock, collaborators, and the two ways to touch its state (read it, apply a decision). The
// Elector builds one and keeps every field private; elector-calls.ts and elector-stop.ts use it.
import type { EventEmitter } from "node:events";
import type { Clock } from "./clock.ts";
import type { Context, Decision, ElectionState } from "./decide.ts";
import type { ElectorEvents, ElectorOptions, TickReport } from "./elector-types.ts";
import type { LeaderWork } from "./leader-work.ts";
import type { ServerClockWatch } from "./server-clock.ts";
import type { Timing } from "./timing.ts";
import type { UnansweredWrites } from "./unanswered-writes.ts";

export interface ElectorCore {
  readonly key: string;
  readonly holder: string;
  readonly timing: Timing;
  readonly ctx: Context;
  readonly clock: Clock;
  readonly options: ElectorOptions;
  readonly work: LeaderWork | null;
  readonly unanswered: UnansweredWrites;
  readonly serverClock: ServerClockWatch;
  readonly stopTimeoutMs: number;
  /** The elector, for its events. */
  readonly events: EventEmitter<ElectorEvents>;
  state(): ElectionState;
  /** The highest fence ever handed to leader work or status(). */
  handedOut(): number;
  /** Session takeover: how often the notice session was given up; a claim sent before a loss is void. */
  sessionLosses(): number;
  apply(decision: Decision, action: TickReport["action"], durationMs: number, schedule?: boolean): void;
  /** A store call bounded on the elector's own clock, so a hung pool or socket costs one tick. */
  call<T>(operation: Promise<T>): Promise<T>;
}
