// One named lease, campaigned for by one process. The loop is a single chain of ticks; each
// tick runs one store call, turns the answer into a Decision (decide.ts) and applies it.
// A separate deadline timer ends leadership locally even while a call hangs.
import { EventEmitter } from "node:events";
import { withDeadline } from "./bounded.ts";
import { type Clock, monotonicClock, type Timer } from "./clock.ts";
import {
  afterError,
  type Context,
  type Decision,
  type ElectionState,
  hostSuspended,
  initialState,
  nextAction,
  type Outcome,
  sessionLost,
  stepDown,
  wonWhileStopping,
} from "./decide.ts";
import { perform } from "./elector-calls.ts";
import type { ElectorCore } from "./elector-core.ts";
import { statusOf } from "./elector-status.ts";
import {
  drain,
  releaseRefused,
  releaseStrayTerm,
  releaseTerm,
  settleUncertainClaim,
} from "./elector-stop.ts";
import type {
  ElectorEvents,
  ElectorOptions,
  ElectorStatus,
  LeaderSeen,
  TickReport,
} from "./elector-types.ts";
import { emitSafely } from "./elector-types.ts";
import { LeaderWork } from "./leader-work.ts";
import { ServerClockWatch } from "./server-clock.ts";
import { wakeAt } from "./shared-ticks.ts";
import { SuspensionWatch } from "./suspension.ts";
import { type Timing, timingOrThrow } from "./timing.ts";
import { UnansweredWrites } from "./unanswered-writes.ts";
import { subscribeWakeUps } from "./wake-ups.ts";

export type { ElectorOptions, ElectorStatus, LeaderSeen, LeaderTerm, TickReport } from "./elector-types.ts";
export type { ClockStepReport } from "./server-clock.ts";

/**
 * How often a leader compares its wall and monotonic clocks between ticks: after a suspension no
 * timer fires early (they run on the monotonic clock), so this bounds how long a resumed leader
 * keeps its work and its pod label. One cheap timer per leading elector per second, beside the
 * deadline timer (left as it was, so what races it at the deadline instant still loses).
 */
const SUSPENSION_CHECK_MS = 1_000;

export class Elector extends EventEmitter<ElectorEvents> {
  readonly key: string;
  readonly holder: string;
  readonly timing: Timing;
  readonly #ctx: Context;
  readonly #opts: ElectorOptions;
  readonly #clock: Clock;
  readonly #stopTimeoutMs: number;
  #state: ElectionState = initialState;
  #lastOutcome: Outcome | null = null;
  #since = new Date();
  #leaderSeen: LeaderSeen;
  #wake: Timer | null = null;
  #deadline: Timer | null = null;
  #suspensionCheck: Timer | null = null;
  #inflight: Promise<void> | null = null;
  #tickRequested = false;
  /** A release notice for this key arrived since the last tick began. */
  #noticed = false;
  /** Something asked for a look since the last tick began: the tick in flight must not hide it. */
  #lookAgain = false;
  #generation = 0;
  #started = false;
  #stopping = false;
  #stopped: Promise<void> | null = null;
  #unsubscribe: Array<() => void> = [];
  /** Session takeover: kept until stop() is over, since a stopping leader still believes. */
  #unsubscribeSessionLost: (() => void) | null = null;
  /** Session takeover: how often the feed gave up the notice session that claims record. */
  #sessionLosses = 0;
  readonly #work: LeaderWork | null;
  /** The highest fence ever handed to leader work or status(); every new term must exceed it. */
  #handedOut = 0;
  readonly #unanswered: UnansweredWrites;
  readonly #suspension: SuspensionWatch;
  /** What the store calls and the stop path see of this elector (elector-core.ts). */
  readonly #core: ElectorCore;

  constructor(options: ElectorOptions) {
    super();
    if (!options.key) throw new TypeError("key must be a non-empty lease name");
    if (!options.holder) throw new TypeError("holder must be a non-empty identity, unique per process");
    // Without it a leader would renew on a session its feed gave up, which a follower may already take.
    if (options.sessionTakeover && !options.releases?.subscribeSessionLost) {
      throw new TypeError(
        "sessionTakeover needs releases with subscribeSessionLost (the feed whose session the store records): " +
          "use openLeases({ sessionTakeover }), which wires both, or drop sessionTakeover",
      );
    }
    this.key = options.key;
    this.holder = options.holder;
    this.timing = timingOrThrow(options);
    this.#opts = options;
    this.#clock = options.clock ?? monotonicClock;
    this.#stopTimeoutMs = options.stopTimeoutMs ?? 5_000;
    this.#ctx = {
      key: this.key,
      holder: this.holder,
      timing: this.timing,
      ...(options.sessionTakeover ? { sessionTakeover: true } : {}),
    };
    this.#unanswered = new UnansweredWrites(this.#clock, this.timing.callTimeoutMs);
    this.#suspension = new SuspensionWatch(this.#clock, this.timing.safetyMarginMs);
    this.#work = options.lead
      ? new LeaderWork(this.#clock, this.#stopTimeoutMs, options.lead, (error) =>
          emitSafely(this, "work-error", error),
        )
      : null;
    this.#leaderSeen = { key: this.key, holder: null, fence: null };
    this.#core = this.#coreView();
  }

  #coreView(): ElectorCore {
    return {
      key: this.key,
      holder: this.holder,
      timing: this.timing,
      ctx: this.#ctx,
      clock: this.#clock,
      options: this.#opts,
      work: this.#work,
      unanswered: this.#unanswered,
      serverClock: new ServerClockWatch(this.key, this.timing.safetyMarginMs),
      stopTimeoutMs: this.#stopTimeoutMs,
      events: this,
      state: () => this.#state,
      handedOut: () => this.#handedOut,
      sessionLosses: () => this.#sessionLosses,
      apply: (decision, action, durationMs, schedule) => this.#apply(decision, action, durationMs, schedule),
      call: (operation) => withDeadline(this.#clock, this.timing.callTimeoutMs, operation),
    };
  }

  /** Starts campaigning. Returns at once; watch the events or status(). */
  start(): void {
    if (this.#started) return;
    this.#started = true;
    const look = () => {
      if (this.#stopping) return;
      this.#lookAgain = true;
      this.#schedule(this.#clock.now());
    };
    const noticed = () => {
      this.#noticed = true;
      look();
    };
    this.#unsubscribe = subscribeWakeUps(this.key, this.#opts, look, noticed);
    if (this.#ctx.sessionTakeover) {
      this.#unsubscribeSessionLost =
        this.#opts.releases?.subscribeSessionLost?.(() => this.#sessionLost()) ?? null;
    }
    this.#schedule(this.#clock.now());
  }

  /**
   * The feed gave up the notice session (ports.ts, ReleaseFeed.subscribeSessionLost): called
   * before the feed closes that connection. A term recording it ends here, at once, as the
   * deadline timer would end it (also while stopping); a claim still out that recorded it will
   * be refused when it answers (elector-calls.ts).
   */
  #sessionLost(): void {
    this.#sessionLosses++;
    if (this.#state.role !== "leader") return;
    this.#apply(sessionLost(this.#ctx, this.#state, this.#clock.now()), "session-lost", 0, !this.#stopping);
  }

  /**
   * False once the local deadline has passed, or the host is seen suspended since the last check,
   * even before the timer that ends the term has run.
   */
  isLeader(): boolean {
    const term = this.#state.term;
    return (
      this.#state.role === "leader" &&
      term !== null &&
      this.#clock.now() < term.deadline &&
      this.#suspension.gap() === null
    );
  }

  status(): ElectorStatus {
    return statusOf({
      key: this.key,
      holder: this.holder,
      state: this.#state,
      leading: this.isLeader(),
      now: this.#clock.now(),
      lastOutcome: this.#lastOutcome,
      since: this.#since,
      notCampaigning: this.#opts.campaign?.reasonNotToLead() ?? null,
    });
  }

  #schedule(at: number): void {
    this.#wake?.cancel();
    this.#wake = wakeAt(this.#clock, at, () => {
      this.#wake = null;
      this.#tick();
    });
  }

  #tick(): void {
    if (this.#stopping) return;
    if (this.#inflight) {
      this.#tickRequested = true;
      return;
    }
    this.#inflight = this.#runTick().finally(() => {
      this.#inflight = null;
      if (this.#tickRequested && !this.#stopping) {
        this.#tickRequested = false;
        // This tick replaces the wake-up the finished one scheduled.
        this.#wake?.cancel();
        this.#wake = null;
        this.#tick();
      }
    });
  }

  async #runTick(): Promise<void> {
    const suspended = this.#state.role === "leader" ? this.#suspension.gap() : null;
    if (suspended !== null) {
      this.#apply(hostSuspended(this.#ctx, this.#state, suspended, this.#clock.now()), "deadline", 0);
      return;
    }
    // Only when there is one: otherwise the call goes out in this very turn of the event loop.
    if (this.#state.role === "follower" && this.#unanswered.claimPending)
      await settleUncertainClaim(this.#core);
    if (this.#stopping) return;
    const generation = this.#generation;
    const sentAt = this.#clock.now();
    const reading = this.#suspension.reading();
    const ctx = this.#tickContext();
    const unfit = this.#opts.campaign?.reasonNotToLead() ?? null;
    const action = nextAction(this.#state, sentAt, {
      noticed: this.#noticed,
      noticesHealthy: ctx.noticesHealthy === true,
      unfit,
    });
    this.#noticed = false;
    this.#lookAgain = false;
    let decision: Decision;
    try {
      decision = await perform(this.#core, ctx, action, sentAt, unfit);
    } catch (error) {
      decision = afterError(ctx, this.#state, action, error, this.#clock.now());
    }
    // The deadline timer or a session loss already ended this term while the call was in flight.
    // A hand-over's release still goes out (scoped to its fence), so its successor claims at once.
    if (generation !== this.#generation) {
      if (action === "resign" && decision.release !== undefined)
        await releaseRefused(this.#core, decision.release);
      return;
    }
    // stop() releases whatever this last call won; nothing may start now. Anything else, a loss
    // above all, applies as usual: a term ends at once, stopping or not.
    if (this.#stopping && decision.outcome === "acquired" && decision.state.term) {
      decision = wonWhileStopping(this.#ctx, decision.state.term.fence, this.#clock.now());
    }
    // The new deadline counts from this send: so does the wall clock's lead.
    if (decision.outcome === "acquired" || decision.outcome === "renewed") this.#suspension.mark(reading);
    this.#apply(decision, action, this.#clock.now() - sentAt, !this.#stopping);
    if (decision.release !== undefined) await releaseRefused(this.#core, decision.release);
  }

  /** The context of one tick: whether notices are heard is asked of the feed each time. */
  #tickContext(): Context {
    // Under session takeover followers keep reading: no notice says a holder's session is gone.
    const healthy = !this.#ctx.sessionTakeover && (this.#opts.releases?.healthy?.() ?? false);
    return healthy ? { ...this.#ctx, noticesHealthy: true } : this.#ctx;
  }

  #apply(decision: Decision, action: TickReport["action"], durationMs: number, schedule = true): void {
    const before = this.#state;
    this.#state = decision.state;
    const report: TickReport = { ...decision, key: this.key, action, durationMs };
    const changed = decision.outcome !== this.#lastOutcome || before.role !== decision.state.role;
    if (before.role !== decision.state.role) this.#since = new Date();
    this.#lastOutcome = decision.outcome;

    if (before.role === "leader" && decision.state.role !== "leader") this.#endTerm(decision.sentence);
    if (decision.state.role === "leader") this.#armDeadline();
    // A notice or a feed change heard while the call was out would otherwise wait for wakeAt.
    if (schedule) this.#schedule(this.#lookAgain ? this.#clock.now() : decision.wakeAt);
    if (decision.outcome === "acquired" && decision.state.term) {
      const { fence, acquiredAt } = decision.state.term;
      this.#handedOut = Math.max(this.#handedOut, fence);
      const term = { key: this.key, holder: this.holder, fence, acquiredAt };
      // Checked again when a previous term's work delays the start: this term may be over by then.
      const generation = this.#generation;
      this.#work?.start(term, () => !this.#stopping && generation === this.#generation && this.isLeader());
    }
    emitSafely(this, "tick", report);
    if (changed) emitSafely(this, "transition", report);
    this.#noteLeader();
  }

  #armDeadline(): void {
    const term = this.#state.term;
    if (!term) return;
    this.#deadline?.cancel();
    this.#deadline = this.#clock.setTimer(term.deadline - this.#clock.now(), () => {
      this.#deadline = null;
      if (this.#state.role !== "leader") return;
      // Also while stopping: a slow stop must not stretch leadership past the deadline.
      this.#generation++;
      this.#apply(stepDown(this.#ctx, this.#state, this.#clock.now()), "deadline", 0, !this.#stopping);
    });
    if (this.#suspensionCheck === null) this.#armSuspensionCheck();
  }

  /** While leading, compares the two clocks each second (a clock without a wall clock: never). */
  #armSuspensionCheck(): void {
    if (this.#suspension.reading() === null) return;
    this.#suspensionCheck = this.#clock.setTimer(SUSPENSION_CHECK_MS, () => {
      this.#suspensionCheck = null;
      if (this.#state.role !== "leader") return;
      const suspended = this.#suspension.gap();
      if (suspended === null) return this.#armSuspensionCheck();
      // Also while stopping, as the deadline timer: the term may be long over on the server.
      this.#generation++;
      this.#apply(
        hostSuspended(this.#ctx, this.#state, suspended, this.#clock.now()),
        "deadline",
        0,
        !this.#stopping,
      );
    });
  }

  #endTerm(reason: string): void {
    this.#generation++;
    this.#deadline?.cancel();
    this.#deadline = null;
    this.#suspensionCheck?.cancel();
    this.#suspensionCheck = null;
    this.#work?.abort(reason);
  }

  #noteLeader(): void {
    const status = this.status();
    const seen = { key: this.key, holder: status.leader, fence: status.leaderFence };
    if (seen.holder === this.#leaderSeen.holder && seen.fence === this.#leaderSeen.fence) return;
    this.#leaderSeen = seen;
    emitSafely(this, "leader-changed", seen);
  }

  /**
   * Stops campaigning: aborts leader work and waits for it (bounded), runs beforeRelease
   * (bounded), then releases the lease, which announces it to followers. Idempotent.
   */
  stop(): Promise<void> {
    this.#stopped ??= this.#shutdown();
    return this.#stopped;
  }

  async #shutdown(): Promise<void> {
    this.#stopping = true;
    this.#wake?.cancel();
    for (const unsubscribe of this.#unsubscribe.splice(0)) unsubscribe();
    this.#work?.abort(`stopping: releasing lease ${this.key}`);
    await this.#inflight;
    const term = this.#state.role === "leader" ? this.#state.term : null;
    if (term) await drain(this.#core, term, "stopping");
    else await this.#work?.ended(this.#stopTimeoutMs);
    // A write still queued on the server could commit after the release: a renew would revive the
    // term, a claim would take one nobody leads. The server's statement timeout bounds the wait.
    await this.#unanswered.settled();
    if (term) await releaseTerm(this.#core, term.fence);
    else if (this.#unanswered.any) await releaseStrayTerm(this.#core);
    this.#deadline?.cancel();
    this.#suspensionCheck?.cancel();
    this.#unsubscribeSessionLost?.();
  }
}
