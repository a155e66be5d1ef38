// A simulated `pglease` process: one real Elector per key (src/election/elector.ts), all sharing
// one holder, one store and one release feed as openLeases() wires them, on a clock that is
// this process's view of simulated time. Its leader work writes through a fence guard model.

import { CampaignSwitch } from "../../src/election/campaign-gate.ts";
import { WitnessedCrashes } from "../../src/election/crash-witness.ts";
import { Elector, type LeaderTerm, stopElectors, type TickReport } from "../../src/election/elector.ts";
import type {
  ClaimAnswer,
  LeaseStore,
  LeaseView,
  ReleasesMany,
  RenewAnswer,
} from "../../src/election/ports.ts";
import type { Timing } from "../../src/election/timing.ts";
import type { Pod } from "../../src/kube/client/api-types.ts";
import { holdersReportedDead } from "../../src/kube/crash-report.ts";
import { BatchedRenewals } from "../../src/postgres/batched-renewals.ts";
import type { PgLeaseStore } from "../../src/postgres/store.ts";
import type { Clock } from "../../src/shared/clock.ts";
import { type Link, linkUp, SimFeed, SimStore, type Wire } from "./client.ts";
import type { EventLoop, Owner } from "./event-loop.ts";
import type { Rng } from "./prng.ts";

/** What the checker hears from inside a process. */
export interface ProcessWatcher {
  /** lead() was called: a term's work starts with this fence. */
  leadStarted(proc: SimProcess, key: string, fence: number): void;
  /** The work wrote through the guard with this fence. */
  wrote(proc: SimProcess, key: string, fence: number): void;
  /** A claim is sent (checked against the process's campaign gate). */
  claimSent(proc: SimProcess, key: string): void;
  /** A renew answered "zero rows" while the elector still waited for it. */
  lossAnswered(proc: SimProcess, key: string, fence: number): void;
  /** Each tick of an elector, as it reports it. */
  ticked(proc: SimProcess, key: string, report: TickReport): void;
}

export interface ProcessConfig {
  wire: Wire;
  timing: Timing;
  keys: readonly string[];
  stopTimeoutMs: number;
  workIntervalMs: number;
  /** The electors consult the process's campaign gate (off only to show what the gate buys). */
  gated: boolean;
  /** Session takeover: claims record the feed's session, and a term may be taken once it is gone. */
  sessionTakeover: boolean;
  /** Crash takeover: claims carry the holders the kubelet model reported dead; each report wakes the followers. */
  crashTakeover: boolean;
  rng: Rng;
  watcher: ProcessWatcher;
}

/**
 * The process's monotonic clock: simulated time from its own origin, at its own rate (local ms
 * per simulated ms: a crystal off its nominal frequency, NTP's slew); its timers wait out its freezes.
 */
export function processClock(loop: EventLoop, owner: Owner, originUs: number, rate = 1): Clock {
  return {
    now: () => ((loop.nowUs - originUs) * rate) / 1000,
    setTimer(delayMs, fire) {
      const event = loop.at(loop.nowUs + Math.ceil((Math.max(0, delayMs) * 1000) / rate), owner, fire);
      return {
        cancel: () => {
          event.cancelled = true;
        },
      };
    },
  };
}

/**
 * BatchedRenewals (the store every elector of a real process renews and releases through) times
 * its renewal window with the global setTimeout; for the length of each renew() call the global is
 * this process's simulated clock, so the real batcher runs on simulated time. Its releases wait for
 * the end of the turn, here the process's next event.
 */
class ProcessStore implements LeaseStore, ReleasesMany {
  readonly #sim: SimStore;
  readonly #batched: BatchedRenewals;
  readonly #clock: Clock;
  readonly #onLoss: (key: string, fence: number, sentAt: number) => void;
  readonly #onClaim: (key: string) => void;

  constructor(
    sim: SimStore,
    clock: Clock,
    onLoss: (key: string, fence: number, sentAt: number) => void,
    onClaim: (key: string) => void,
  ) {
    this.#sim = sim;
    this.#clock = clock;
    this.#onLoss = onLoss;
    this.#onClaim = onClaim;
    // The end of a turn is the next event of this process on simulated time.
    this.#batched = new BatchedRenewals(sim as unknown as PgLeaseStore, {
      afterTurn: (fire) => clock.setTimer(0, fire),
    });
  }

  claim(key: string, holder: string, durationMs: number): Promise<ClaimAnswer> {
    this.#onClaim(key);
    return this.#sim.claim(key, holder, durationMs);
  }

  read(key: string): Promise<LeaseView | null> {
    return this.#sim.read(key);
  }

  release(key: string, holder: string, fence: number): Promise<boolean> {
    return this.#batched.release(key, holder, fence);
  }

  /** A graceful stop's one statement for every term (stopElectors), as openLeases().close() sends it. */
  releaseMany(holder: string, terms: ReadonlyArray<{ key: string; fence: number }>) {
    return this.#batched.releaseMany(holder, terms);
  }

  renew(key: string, holder: string, fence: number, durationMs: number): Promise<RenewAnswer> {
    const sentAt = this.#clock.now();
    const answer = this.#onSimulatedTime(() => this.#batched.renew(key, holder, fence, durationMs));
    answer.then(
      (a) => {
        if (!a.renewed) this.#onLoss(key, fence, sentAt);
      },
      () => {},
    );
    return answer;
  }

  /** Runs `call` with the global setTimeout pointed at this process's simulated clock. */
  #onSimulatedTime<T>(call: () => T): T {
    const saved = globalThis.setTimeout;
    const simulated = (fire: () => void, ms?: number) => this.#clock.setTimer(ms ?? 0, fire);
    globalThis.setTimeout = simulated as unknown as typeof setTimeout;
    try {
      return call();
    } finally {
      globalThis.setTimeout = saved;
    }
  }
}

export class SimProcess implements Owner {
  readonly name: string;
  readonly holder: string;
  readonly slot: number;
  frozenUntil = 0;
  dead = false;
  /** When stop() finished and the process exited (sim µs); null while it runs or after a crash. */
  exitedAtUs: number | null = null;
  stopping = false;
  readonly link: Link = linkUp();
  readonly feed: SimFeed;
  readonly clock: Clock;
  readonly electors = new Map<string, Elector>();
  /** Opened and closed by the "unfit" fault: its application's health. */
  readonly #campaign = new CampaignSwitch();
  readonly #config: ProcessConfig;
  readonly #witness: WitnessedCrashes | null;
  readonly #store: ProcessStore;

  constructor(
    config: ProcessConfig,
    slot: number,
    name: string,
    holder: string,
    originUs: number,
    clockRate: number,
  ) {
    this.#config = config;
    this.slot = slot;
    this.name = name;
    this.holder = holder;
    const { wire, timing, watcher } = config;
    this.clock = processClock(wire.loop, this, originUs, clockRate);
    this.feed = new SimFeed(wire, this);
    // Connected before anything campaigns, as openLeases() listens before it returns.
    if (config.sessionTakeover) this.feed.openSession();
    const witness = config.crashTakeover ? new WitnessedCrashes() : null;
    this.#witness = witness;
    const sim = new SimStore(
      wire,
      this,
      this.link,
      config.sessionTakeover ? () => this.feed.session : null,
      () => witness?.dead() ?? [],
    );
    // As openLeases wires it: a report is a notice for every key (the claim decides).
    witness?.subscribe(() => {
      for (const key of config.keys) this.feed.announce(key, "crash report");
    });
    const store = new ProcessStore(
      sim,
      this.clock,
      (key, fence, sentAt) => {
        // The elector stops waiting at its call timeout; an answer after that is not its to act on.
        if (this.clock.now() < sentAt + timing.callTimeoutMs) watcher.lossAnswered(this, key, fence);
      },
      (key) => watcher.claimSent(this, key),
    );
    this.#store = store;
    for (const key of config.keys) {
      const elector = new Elector({
        ...timing,
        key,
        holder,
        store,
        releases: this.feed,
        clock: this.clock,
        stopTimeoutMs: config.stopTimeoutMs,
        ...(config.gated ? { campaign: this.#campaign } : {}),
        ...(config.sessionTakeover ? { sessionTakeover: true } : {}),
        lead: (term) => this.#lead(term),
      });
      elector.on("tick", (report) => {
        watcher.ticked(this, key, report);
        if (wire.trace.on) {
          const how = report.change ? ` (${report.change.reason})` : "";
          wire.trace.add(wire.loop.nowUs, name, `${report.outcome}: ${report.sentence}${how}`);
        }
      });
      this.electors.set(key, elector);
    }
  }

  closeGate(reason: string): void {
    this.#campaign.unfit(reason);
  }

  openGate(): void {
    this.#campaign.fit();
  }

  gateClosed(): boolean {
    return this.#campaign.reasonNotToLead() !== null;
  }

  start(): void {
    for (const elector of this.electors.values()) elector.start();
  }

  /** Graceful: every elector stops (work, release) as close() stops them; then the process exits. */
  async stop(): Promise<void> {
    this.stopping = true;
    await stopElectors(this.electors.values(), this.#store);
    this.exitedAtUs = this.#config.wire.loop.nowUs;
    this.dead = true;
    this.feed.exited();
  }

  /**
   * The kubelet's report as this process's peer view brings it (in its own event): the holders
   * that status names dead, by the sidecar's own matcher.
   */
  peerStatus(pod: Pod): void {
    for (const holder of holdersReportedDead(pod, null, "pglease")) {
      if (this.#witness?.add(holder))
        this.#config.wire.trace.add(
          this.#config.wire.loop.nowUs,
          this.name,
          `kubelet reports ${holder} terminated`,
        );
    }
  }

  /** SIGKILL: nothing more runs; statements already sent still reach the server. */
  crash(): void {
    this.dead = true;
    this.feed.exited();
  }

  /** Leader work: writes through the guard at once and then every interval, until aborted. */
  #lead(term: LeaderTerm): Promise<void> {
    const { watcher, workIntervalMs, rng } = this.#config;
    watcher.leadStarted(this, term.key, term.fence);
    return new Promise((resolve) => {
      let next: { cancel(): void } | null = null;
      const write = () => {
        if (term.signal.aborted) return;
        watcher.wrote(this, term.key, term.fence);
        next = this.clock.setTimer(workIntervalMs, write);
      };
      term.signal.addEventListener(
        "abort",
        () => {
          next?.cancel();
          // Work takes a moment to wind down after its signal.
          this.clock.setTimer(rng.int(0, 20), resolve);
        },
        { once: true },
      );
      write();
    });
  }
}
