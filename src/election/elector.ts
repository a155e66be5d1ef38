// One named lease, campaigned for by one process. The loop is a single chain of ticks; each
// tick runs one store call, turns the answer into a Decision (decide.ts) and applies it.
// A separate deadline timer ends leadership locally even while a call hangs.
import { EventEmitter } from "node:events";
import { settledWithin, withDeadline } from "./bounded.ts";
import { type Clock, monotonicClock, type Timer } from "./clock.ts";
import {
  type Action,
  afterClaim,
  afterError,
  afterRead,
  afterRenew,
  type Context,
  type Decision,
  type ElectionState,
  initialState,
  nextAction,
  type Outcome,
  released,
  releaseFailed,
  stepDown,
} from "./decide.ts";
import { type RunningWork, startLeaderWork } from "./leader-work.ts";
import type { LeaseStore, ReleaseFeed } from "./ports.ts";
import { type Timing, type TimingInput, timingOrThrow } from "./timing.ts";

export interface LeaderTerm {
  key: string;
  holder: string;
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
  /** Leader-only work, started on each acquisition with the fence and a signal. */
  lead?: (term: LeaderTerm) => unknown;
  /** Awaited (bounded) before a graceful release: demote the pod first, so there is a gap, never an overlap. */
  beforeRelease?: (term: { key: string; fence: number }) => Promise<unknown>;
  /** Bound on waiting for leader work, and for beforeRelease, when stopping. */
  stopTimeoutMs?: number;
}

export interface TickReport extends Decision {
  key: string;
  action: Action | "deadline" | "release";
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
}

type ElectorEvents = {
  tick: [TickReport];
  transition: [TickReport];
  "leader-changed": [LeaderSeen];
  "work-error": [unknown];
};

export class Elector extends EventEmitter<ElectorEvents> {
  readonly key: string;
  readonly holder: string;
  readonly timing: Timing;
  readonly #ctx: Context;
  readonly #opts: ElectorOptions;
  readonly #clock: Clock;
  #state: ElectionState = initialState;
  #lastOutcome: Outcome | null = null;
  #since = new Date();
  #leaderSeen: LeaderSeen;
  #wake: Timer | null = null;
  #deadline: Timer | null = null;
  #inflight: Promise<void> | null = null;
  #tickRequested = false;
  #releaseAnnounced = false;
  /** The last claim got no answer: it may have committed all the same. */
  #claimUncertain = false;
  #generation = 0;
  #started = false;
  #stopping = false;
  #stopped: Promise<void> | null = null;
  #unsubscribe: (() => void) | null = null;
  #work: RunningWork | null = null;

  constructor(options: ElectorOptions) {
    super();
    if (!options.key) throw new TypeError("key must be a non-empty lease name");
    if (!options.holder) throw new TypeError("holder must be a non-empty identity, unique per process");
    this.key = options.key;
    this.holder = options.holder;
    this.timing = timingOrThrow(options);
    this.#opts = options;
    this.#clock = options.clock ?? monotonicClock;
    this.#ctx = { key: this.key, holder: this.holder, timing: this.timing };
    this.#leaderSeen = { key: this.key, holder: null, fence: null };
  }

  /** Starts campaigning. Returns at once; watch the events or status(). */
  start(): void {
    if (this.#started) return;
    this.#started = true;
    this.#unsubscribe =
      this.#opts.releases?.subscribe((key) => {
        if (key !== this.key || this.#stopping) return;
        // A leader told of a release of its own lease (an operator's) renews at once, finds no row
        // and steps down, instead of leading on until its next scheduled renew.
        if (this.#state.role !== "leader") this.#releaseAnnounced = true;
        this.#schedule(this.#clock.now());
      }) ?? null;
    this.#schedule(this.#clock.now());
  }

  /** False once the local deadline has passed, even before the deadline timer has run. */
  isLeader(): boolean {
    const term = this.#state.term;
    return this.#state.role === "leader" && term !== null && this.#clock.now() < term.deadline;
  }

  status(): ElectorStatus {
    const { observed } = this.#state;
    // Answered from the clock, not only the state: a loop that was blocked past the deadline may
    // serve a request before its deadline timer runs.
    const term = this.isLeader() ? this.#state.term : null;
    const role = term ? "leader" : "follower";
    return {
      key: this.key,
      holder: this.holder,
      role,
      fence: term?.fence ?? null,
      leader: role === "leader" ? this.holder : (observed?.holder ?? null),
      leaderFence: term?.fence ?? observed?.fence ?? null,
      expiresAt: term?.expiresAt ?? observed?.expiresAt ?? null,
      lastOutcome: this.#lastOutcome,
      since: this.#since,
      deadlineInMs: term ? Math.max(0, term.deadline - this.#clock.now()) : null,
    };
  }

  #schedule(at: number): void {
    this.#wake?.cancel();
    this.#wake = this.#clock.setTimer(at - this.#clock.now(), () => {
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
        this.#tick();
      }
    });
  }

  async #runTick(): Promise<void> {
    const generation = this.#generation;
    const sentAt = this.#clock.now();
    const action = nextAction(this.#state, sentAt, this.#releaseAnnounced);
    this.#releaseAnnounced = false;
    let decision: Decision;
    try {
      decision = await this.#perform(action, sentAt);
    } catch (error) {
      decision = afterError(this.#ctx, this.#state, action, error, this.#clock.now());
    }
    const durationMs = this.#clock.now() - sentAt;
    this.#claimUncertain = action !== "renew" && decision.outcome === "transient-error";
    if (this.#stopping) {
      // stop() releases whatever this last call won; nothing else may start now.
      if (generation === this.#generation && decision.state.role === "leader") {
        this.#state = decision.state;
        this.#armDeadline();
      }
      return;
    }
    // The deadline timer already ended this term while the call was in flight.
    if (generation !== this.#generation) return;
    this.#apply(decision, action, durationMs);
  }

  async #perform(action: Action, sentAt: number): Promise<Decision> {
    const { store } = this.#opts;
    const { leaseDurationMs } = this.timing;
    if (action === "renew") {
      const term = this.#state.term;
      if (!term) throw new Error("renew without a term");
      const answer = await this.#call(store.renew(this.key, this.holder, term.fence, leaseDurationMs));
      return afterRenew(this.#ctx, this.#state, answer, sentAt, this.#clock.now());
    }
    if (action === "read") {
      const view = await this.#call(store.read(this.key));
      const decision = afterRead(this.#ctx, view, this.#clock.now());
      // Free, expired or ours: claim in the same tick.
      if (decision) return decision;
      sentAt = this.#clock.now();
    }
    const answer = await this.#call(store.claim(this.key, this.holder, leaseDurationMs));
    return afterClaim(this.#ctx, answer, sentAt, this.#clock.now());
  }

  /** A store call bounded on the elector's own clock, so a hung pool or socket costs one tick. */
  #call<T>(operation: Promise<T>): Promise<T> {
    return withDeadline(this.#clock, this.timing.callTimeoutMs, operation);
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
    // Scheduled before the listeners run, so a throwing listener cannot stop the loop.
    if (schedule) this.#schedule(decision.wakeAt);
    if (decision.outcome === "acquired") this.#startWork();
    this.emit("tick", report);
    if (changed) this.emit("transition", report);
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
  }

  #endTerm(reason: string): void {
    this.#generation++;
    this.#deadline?.cancel();
    this.#deadline = null;
    this.#work?.abort(reason);
  }

  #startWork(): void {
    const lead = this.#opts.lead;
    const term = this.#state.term;
    if (!lead || !term) return;
    this.#work = startLeaderWork(
      lead,
      { key: this.key, holder: this.holder, fence: term.fence, acquiredAt: term.acquiredAt },
      (error) => this.emit("work-error", error),
    );
  }

  #noteLeader(): void {
    const status = this.status();
    const seen = { key: this.key, holder: status.leader, fence: status.leaderFence };
    if (seen.holder === this.#leaderSeen.holder && seen.fence === this.#leaderSeen.fence) return;
    this.#leaderSeen = seen;
    this.emit("leader-changed", seen);
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
    this.#unsubscribe?.();
    this.#work?.abort(`stopping: releasing lease ${this.key}`);
    await this.#inflight;
    const term = this.#state.role === "leader" ? this.#state.term : null;
    if (!term) {
      await this.#releaseUncertainClaim();
      return;
    }
    // Each wait ends by the local deadline at the latest; the deadline timer stays armed and steps
    // down if a wait runs that long, so stopping never stretches leadership.
    const bound = () =>
      Math.max(0, Math.min(this.#opts.stopTimeoutMs ?? 5_000, term.deadline - this.#clock.now()));
    if (this.#work) await settledWithin(this.#clock, bound(), this.#work.done);
    const demote = this.#opts.beforeRelease;
    if (demote) {
      const demoted = Promise.resolve().then(() => demote({ key: this.key, fence: term.fence }));
      await settledWithin(this.#clock, bound(), demoted);
    }
    const sentAt = this.#clock.now();
    let decision: Decision;
    try {
      // Scoped to this term's fence: harmless if the term already ended.
      const ended = await this.#call(this.#opts.store.release(this.key, this.holder, term.fence));
      decision = released(this.#ctx, term.fence, ended, this.#clock.now());
    } catch (error) {
      decision = releaseFailed(this.#ctx, term.fence, error, this.#clock.now());
    }
    this.#apply(decision, "release", this.#clock.now() - sentAt, false);
    this.#deadline?.cancel();
  }

  /** A claim that timed out may still have committed: release it if the row says it is ours. */
  async #releaseUncertainClaim(): Promise<void> {
    if (!this.#claimUncertain) return;
    try {
      const view = await this.#call(this.#opts.store.read(this.key));
      if (view && view.holder === this.holder && view.ttlMs > 0) {
        await this.#call(this.#opts.store.release(this.key, this.holder, view.fence));
      }
    } catch {
      // Unreachable: the lease, if ours, ends at its expiry on the server.
    }
  }
}
