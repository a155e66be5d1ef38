// The elector: one named lease, campaigned for by one process, against a LeaseStore and an
// optional ReleaseFeed (ports.ts). The loop is a single chain of ticks; each tick runs one store
// call, turns its answer into a Decision (decide.ts, pure: its sentence is the log line and the
// test oracle) and applies it. A deadline timer ends leadership locally even while a call hangs.
//
// What it guarantees: every lead() gets a fence higher than any this elector handed out before;
// leadership ends locally, and lead()'s signal is aborted, at the local deadline (the send of the
// last good claim or renew + its ttl − the safety margin), before the server may give the lease to
// anyone else; a write that got no answer is waited for (bounded) before the lease is released;
// stop() ends the work, runs beforeRelease, then releases. What it assumes: pauses shorter than
// the margin, a server clock slewed and not stepped (a step is reported, a forward one ends the
// term), a host suspension seen on resume (the wall clock against the monotonic one), server-side
// statement timeouts, one elector per key and holder. What it does NOT guarantee: that two
// processes never *believe* they lead at once; only a resource that rejects stale fences closes
// that window (src/fence). docs/guarantees.md states each exactly; a change to one changes it there.
import { EventEmitter } from "node:events";
import { type Clock, monotonicClock, type Timer } from "../shared/clock.ts";
import { settledWithin, withDeadline } from "./bounded.ts";
import {
  type Action,
  afterClaim,
  afterError,
  afterRead,
  afterRenew,
  type Context,
  type Decision,
  type ElectionState,
  hostSuspended,
  initialState,
  lateClaimWon,
  nextAction,
  type Outcome,
  refusedReleaseFailed,
  releaseFailed,
  releasing,
  resigned,
  serverClockJumped,
  sessionLost,
  stepDown,
  strayTerm,
  type Term,
  wonOnLostSession,
  wonWhileStopping,
} from "./decide.ts";
import type {
  ElectorEvents,
  ElectorOptions,
  ElectorStatus,
  LeaderSeen,
  TickReport,
} from "./elector-types.ts";
import { LeaderWork } from "./leader-work.ts";
import type { LeaseStore, ReleasesMany } from "./ports.ts";
import { ReleaseBatch } from "./release-batch.ts";
import { ServerClockWatch } from "./server-clock.ts";
import { wakeAt } from "./shared-ticks.ts";
import { everySuspensionCheck, SuspensionWatch } from "./suspension.ts";
import { type ResolvedTiming, type Timing, type TimingInput, timingOrThrow } from "./timing.ts";
import { UnansweredWrites } from "./unanswered-writes.ts";

export type { ElectorOptions, ElectorStatus, LeaderSeen, LeaderTerm, TickReport } from "./elector-types.ts";
export type { ClockStepReport } from "./server-clock.ts";

/** stopElectors' body, written inside the class (its static block), which alone reaches each elector's state. */
let stopTogether: (electors: Iterable<Elector>, store: LeaseStore & ReleasesMany) => Promise<void>;

/**
 * Stops many electors at once, each with every guarantee of its own stop(), for a process that
 * holds thousands of leases (close()). An elector that has nothing to wait for once its tick in
 * flight (if any) is over (no leader work running, no beforeRelease, no write that may still
 * commit) ends its term here and hands its fence to one releaseMany through `store`, the store
 * it campaigns on, sent once the turn is over: every term of that statement has ended here
 * before it goes out. A failed or unanswered statement is reported by each of its electors as
 * its own release would be; those terms end on the server at their expiry. Every other elector
 * stops as its own stop() does. Resolves when every elector has stopped.
 */
export function stopElectors(electors: Iterable<Elector>, store: LeaseStore & ReleasesMany): Promise<void> {
  return stopTogether(electors, store);
}

/** Options built by electorWith(), with the timing their caller already resolved. */
const resolvedByCaller = new WeakMap<ElectorOptions, ResolvedTiming>();

/**
 * An elector on timing its caller resolved (the composition root checks it against the statement
 * timeout and gives it to the candidacy first): taken as is, not resolved again. `new Elector()`
 * resolves the timing fields of its options itself.
 */
export function electorWith(
  timing: ResolvedTiming,
  options: Omit<ElectorOptions, keyof TimingInput>,
): Elector {
  const withTiming: ElectorOptions = { ...options, ...timing };
  resolvedByCaller.set(withTiming, timing);
  return new Elector(withTiming);
}

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
  readonly #serverClock: ServerClockWatch;

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
    const timing = resolvedByCaller.get(options) ?? timingOrThrow(options);
    this.key = options.key;
    this.holder = options.holder;
    this.timing = timing;
    this.#opts = options;
    this.#clock = options.clock ?? monotonicClock;
    this.#stopTimeoutMs = options.stopTimeoutMs ?? 5_000;
    this.#ctx = {
      key: this.key,
      holder: this.holder,
      timing,
      ...(options.sessionTakeover ? { sessionTakeover: true } : {}),
    };
    this.#unanswered = new UnansweredWrites(this.#clock, timing.callTimeoutMs);
    this.#suspension = new SuspensionWatch(this.#clock, timing.safetyMarginMs);
    this.#serverClock = new ServerClockWatch(this.key, timing.safetyMarginMs);
    this.#work = options.lead
      ? new LeaderWork(this.#clock, this.#stopTimeoutMs, options.lead, (error) =>
          emitSafely(this, "work-error", error),
        )
      : null;
    this.#leaderSeen = { key: this.key, holder: null, fence: null };
  }

  /**
   * Starts campaigning. Returns at once; watch the events or status(). What makes it look at once
   * instead of at its next scheduled tick: a notice makes a follower claim at once (nextAction
   * says why that is safe even when it is forged), and a leader renew at once, so an operator's
   * release of its lease ends it at once. A reconnection (notices may have been missed) or a feed
   * no longer known healthy makes a follower read at once; from then on it polls until the feed
   * is healthy again. The gate closing makes a leader hand over at once; opening makes a follower
   * look, and claim.
   */
  start(): void {
    if (this.#started) return;
    this.#started = true;
    const look = () => {
      if (this.#stopping) return;
      this.#lookAgain = true;
      this.#schedule(this.#clock.now());
    };
    const { releases: feed, campaign } = this.#opts;
    if (feed) {
      this.#unsubscribe.push(
        feed.subscribe((key) => {
          if (key !== this.key) return;
          this.#noticed = true;
          look();
        }),
      );
    }
    if (feed?.subscribeReconnects) this.#unsubscribe.push(feed.subscribeReconnects(look));
    if (feed?.subscribeUnhealthy) this.#unsubscribe.push(feed.subscribeUnhealthy(look));
    if (campaign) this.#unsubscribe.push(campaign.subscribe(look));
    if (this.#ctx.sessionTakeover) {
      this.#unsubscribeSessionLost = feed?.subscribeSessionLost?.(() => this.#sessionLost()) ?? null;
    }
    this.#schedule(this.#clock.now());
  }

  /**
   * The feed gave up the notice session (ports.ts, ReleaseFeed.subscribeSessionLost): called
   * before the feed closes that connection. A term recording it ends here, at once, as the
   * deadline timer would end it (also while stopping); a claim still out that recorded it is
   * refused when it answers (#perform).
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
    // Answered from the clock, not only the state: a loop that was blocked past the deadline may
    // serve a request before its deadline timer runs.
    const { observed } = this.#state;
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
      notCampaigning: this.#opts.campaign?.reasonNotToLead() ?? null,
    };
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
    if (this.#state.role === "follower" && this.#unanswered.claimPending) await this.#settleUncertainClaim();
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
      decision = await this.#perform(ctx, action, sentAt, unfit);
    } catch (error) {
      decision = afterError(ctx, this.#state, action, error, this.#clock.now());
    }
    // The deadline timer or a session loss already ended this term while the call was in flight.
    // A hand-over's release still goes out (scoped to its fence), so its successor claims at once.
    if (generation !== this.#generation) {
      if (action === "resign" && decision.release !== undefined) await this.#releaseRefused(decision.release);
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
    if (decision.release !== undefined) await this.#releaseRefused(decision.release);
  }

  /** The context of one tick: whether notices are heard is asked of the feed each time. */
  #tickContext(): Context {
    // Under session takeover followers keep reading: no notice says a holder's session is gone.
    const healthy = !this.#ctx.sessionTakeover && (this.#opts.releases?.healthy?.() ?? false);
    return healthy ? { ...this.#ctx, noticesHealthy: true } : this.#ctx;
  }

  /** A store call bounded on the elector's own clock, so a hung pool or socket costs one tick. */
  #call<T>(operation: Promise<T>): Promise<T> {
    return withDeadline(this.#clock, this.#ctx.timing.callTimeoutMs, operation);
  }

  /**
   * One tick's store call: the action nextAction chose (renew, read then perhaps claim, claim, or
   * a hand-over), turned into a Decision by decide.ts. Every answer's server time feeds the clock watch.
   */
  async #perform(ctx: Context, action: Action, sentAt: number, unfit: string | null): Promise<Decision> {
    const { store, campaign } = this.#opts;
    const { leaseDurationMs } = this.#ctx.timing;
    if (action === "resign") return this.#handOver(unfit ?? "its campaign gate closed");
    if (action === "renew") {
      const term = this.#state.term;
      if (!term) throw new Error("renew without a term");
      const renew = store.renew(this.key, this.holder, term.fence, leaseDurationMs);
      const answer = await this.#unanswered.write(renew, (o) => this.#call(o));
      const receivedAt = this.#clock.now();
      const step = answer.renewed ? this.#observeServer(answer, sentAt, receivedAt) : null;
      if (step?.direction === "forward") return serverClockJumped(ctx, this.#state, step.sizeMs, receivedAt);
      return afterRenew(ctx, this.#state, answer, sentAt, receivedAt);
    }
    if (action === "read") {
      const view = await this.#call(store.read(this.key));
      const receivedAt = this.#clock.now();
      if (view) this.#observeServer(view, sentAt, receivedAt);
      // Asked again: the gate may have closed while the read was out, and a claim follows at once.
      const decision = afterRead(ctx, view, receivedAt, campaign?.reasonNotToLead() ?? null);
      // Free, expired or ours: claim in the same tick.
      if (decision) return decision;
      sentAt = receivedAt;
    }
    // The store reads the notice session to record as it sends the claim, in this very turn.
    const losses = this.#sessionLosses;
    const claim = store.claim(this.key, this.holder, leaseDurationMs);
    const answer = await this.#unanswered.claim(claim, (o) => this.#call(o));
    const receivedAt = this.#clock.now();
    this.#observeServer(answer, sentAt, receivedAt);
    // The term records a session this process has given up: it may be taken over any moment.
    if (answer.won && this.#sessionLosses !== losses) return wonOnLostSession(ctx, answer.fence, receivedAt);
    return afterClaim(ctx, answer, sentAt, receivedAt, this.#handedOut);
  }

  /** Feeds one answer's server time to the clock watch; a step is reported, and returned. */
  #observeServer(
    answer: { expiresAt: Date | null; ttlMs: number | null },
    sentAt: number,
    receivedAt: number,
  ) {
    const step = this.#serverClock.observe(answer, sentAt, receivedAt);
    if (answer.expiresAt !== null && answer.ttlMs !== null) {
      const serverNowMs = answer.expiresAt.getTime() - answer.ttlMs;
      emitSafely(this, "server-time", { serverNowMs, roundTripMs: receivedAt - sentAt });
    }
    if (step) emitSafely(this, "clock-step", step);
    return step;
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
    // While leading, the two clocks are compared each second, on the process's shared timer.
    this.#suspensionCheck ??= everySuspensionCheck(this.#clock, () => this.#checkSuspension());
  }

  #checkSuspension(): void {
    if (this.#state.role !== "leader") return;
    const suspended = this.#suspension.gap();
    if (suspended === null) return;
    // Also while stopping, as the deadline timer: the term may be long over on the server.
    this.#generation++;
    this.#apply(
      hostSuspended(this.#ctx, this.#state, suspended, this.#clock.now()),
      "deadline",
      0,
      !this.#stopping,
    );
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

  // How terms end on purpose: a hand-over when the campaign gate closes, the stop, and the terms
  // it won but will not lead (a claim answered late, a win while stopping, a write that got no
  // answer). Each ends the term here before the release is sent: no elector believes it leads
  // once its release may have been seen.

  async #shutdown(): Promise<void> {
    this.#beginStop();
    await this.#inflight;
    const term = this.#state.role === "leader" ? this.#state.term : null;
    if (term) await this.#drain(term, "stopping");
    else await this.#work?.ended(this.#stopTimeoutMs);
    // A write still queued on the server could commit after the release: a renew would revive the
    // term, a claim would take one nobody leads. The server's statement timeout bounds the wait.
    await this.#unanswered.settled();
    if (term) await this.#releaseTerm(term.fence);
    else if (this.#unanswered.any) await this.#releaseStrayTerm();
    this.#finishStop();
  }

  #beginStop(): void {
    this.#stopping = true;
    this.#wake?.cancel();
    for (const unsubscribe of this.#unsubscribe.splice(0)) unsubscribe();
    this.#work?.abort(`stopping: releasing lease ${this.key}`);
  }

  #finishStop(): void {
    this.#deadline?.cancel();
    this.#suspensionCheck?.cancel();
    this.#unsubscribeSessionLost?.();
  }

  /**
   * stop() of one elector of stopElectors: what #shutdown does, but when nothing is left to wait
   * for once the tick in flight (if any) is over (no work running, no write that may still commit;
   * for a term, no beforeRelease and `batch` on its own store), its term ends here, as
   * #releaseTerm ends it, and its release joins the batch's statement. Otherwise #shutdown goes on.
   */
  async #stopAmong(batch: ReleaseBatch, store: LeaseStore): Promise<void> {
    this.#beginStop();
    if (this.#inflight) await this.#inflight;
    const term = this.#state.role === "leader" ? this.#state.term : null;
    const waits =
      this.#work?.running === true ||
      this.#unanswered.unsettled ||
      (term ? this.#opts.beforeRelease !== undefined || this.#opts.store !== store : this.#unanswered.any);
    if (waits) return this.#shutdown();
    if (term) {
      this.#apply(releasing(this.#ctx, term.fence, this.#clock.now()), "release", 0, false);
      const sentAt = this.#clock.now();
      const failure = await batch.release(this.holder, this.key, term.fence, this.#ctx.timing.callTimeoutMs);
      if (failure) {
        const failed = releaseFailed(this.#ctx, term.fence, failure.error, this.#clock.now());
        this.#apply(failed, "release", this.#clock.now() - sentAt, false);
      }
    }
    this.#finishStop();
  }

  static {
    stopTogether = async (electors, store) => {
      const batches = new Map<Clock, ReleaseBatch>();
      const stopped: Array<Promise<void>> = [];
      for (const elector of electors) {
        if (!elector.#stopped) {
          const clock = elector.#clock;
          const batch = batches.get(clock) ?? new ReleaseBatch(store, clock);
          batches.set(clock, batch);
          // Assigned before the stop begins: a listener of the events it emits may call stop().
          let settle = { resolve: () => {}, reject: (_: unknown) => {} };
          elector.#stopped = new Promise<void>((resolve, reject) => {
            settle = { resolve, reject };
          });
          elector.#stopAmong(batch, store).then(settle.resolve, settle.reject);
        }
        stopped.push(elector.#stopped);
      }
      await Promise.all(stopped);
    };
  }

  /**
   * The campaign gate closed while leading: as stop() does, the work ends and beforeRelease runs
   * (bounded, and never past the deadline), then a write still queued on the server settles, so no
   * renew revives the term after its release. The tick applies the decision, then releases.
   */
  async #handOver(reason: string): Promise<Decision> {
    const term = this.#state.term;
    if (!term) throw new Error("a hand-over without a term");
    this.#work?.abort(`handing over lease ${this.key}: ${reason}`);
    await this.#drain(term, reason);
    await this.#unanswered.settled();
    return resigned(this.#ctx, term.fence, reason, this.#clock.now());
  }

  /** Waits for the work, then beforeRelease: each bounded, and never past the local deadline. */
  async #drain(term: Term, reason: string): Promise<void> {
    // The deadline timer stays armed and steps down if a wait runs that long.
    const bound = () => Math.max(0, Math.min(this.#stopTimeoutMs, term.deadline - this.#clock.now()));
    await this.#work?.ended(bound());
    const demote = this.#opts.beforeRelease;
    if (demote) {
      const demoted = Promise.resolve().then(() => demote({ key: this.key, fence: term.fence, reason }));
      await settledWithin(this.#clock, bound(), demoted);
    }
  }

  /** A follower first waits (bounded) for a claim that got no answer: if it won after all, that term is refused. */
  async #settleUncertainClaim(): Promise<void> {
    const answer = await this.#unanswered.settleClaim();
    if (!answer?.won) return;
    this.#apply(lateClaimWon(this.#ctx, answer.fence, this.#clock.now()), "claim", 0, false);
    await this.#releaseRefused(answer.fence);
  }

  /** Ends a term this elector won but will not lead; if that fails, it ends at its expiry. */
  async #releaseRefused(fence: number): Promise<void> {
    try {
      await this.#call(this.#opts.store.release(this.key, this.holder, fence));
    } catch (error) {
      const failed = refusedReleaseFailed(this.#ctx, this.#state, fence, error, this.#clock.now());
      this.#apply(failed, "release", 0, false);
    }
  }

  /** Ends the term here first (unless its deadline or a loss already did), then on the server. */
  async #releaseTerm(fence: number): Promise<void> {
    if (this.#state.role === "leader") {
      this.#apply(releasing(this.#ctx, fence, this.#clock.now()), "release", 0, false);
    }
    const sentAt = this.#clock.now();
    try {
      // Scoped to this term's fence: harmless if the term already ended.
      await this.#call(this.#opts.store.release(this.key, this.holder, fence));
    } catch (error) {
      const failed = releaseFailed(this.#ctx, fence, error, this.#clock.now());
      this.#apply(failed, "release", this.#clock.now() - sentAt, false);
    }
  }

  /** A write without a timely answer may have left a live term in this holder's name: release it. */
  async #releaseStrayTerm(): Promise<void> {
    try {
      const view = await this.#call(this.#opts.store.read(this.key));
      if (view && view.holder === this.holder && view.ttlMs > 0) {
        this.#apply(strayTerm(this.#ctx, view.fence, this.#clock.now()), "release", 0, false);
        await this.#releaseRefused(view.fence);
      }
    } catch {
      // Unreachable: the term, if any, ends at its expiry on the server.
    }
  }
}

/**
 * Calls every listener even when one throws, so a tick is always applied whole (a throwing
 * listener would otherwise end it half-applied). The error goes to "listener-error" listeners,
 * or, when there are none, out as a process warning.
 */
function emitSafely<K extends keyof ElectorEvents>(
  emitter: EventEmitter<ElectorEvents>,
  event: K,
  ...args: ElectorEvents[K]
): void {
  const listeners = emitter.rawListeners(event as string) as Array<(...a: unknown[]) => unknown>;
  for (const listener of listeners) {
    try {
      listener.apply(emitter, args);
    } catch (error) {
      if (event !== "listener-error" && emitter.listenerCount("listener-error") > 0) {
        emitSafely(emitter, "listener-error", error, event);
      } else {
        process.emitWarning(`a listener of the elector's "${event}" event threw: ${String(error)}`);
      }
    }
  }
}
