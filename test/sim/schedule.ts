// One schedule: build the world for a seed (server model, processes with real electors, faults),
// run it to its end or to its first violation, and tell what happened.

import { RESTART_PROOF_MARKER } from "../../src/election/identity.ts";
import type { Pod } from "../../src/kube/client/api-types.ts";
import { terminationMessage } from "../../src/kube/crash-report.ts";
import { Checker, type Violation } from "./checker.ts";
import { latencyUs, type Wire } from "./client.ts";
import { EventLoop } from "./event-loop.ts";
import { describeFault, type Fault, SESSION_RECONNECT_MS } from "./faults.ts";
import { Rng } from "./prng.ts";
import { SimProcess } from "./process.ts";
import { healMs, type Scenario, type SimOptions } from "./scenario.ts";
import { Server } from "./server.ts";
import { fmtTime, Trace } from "./trace.ts";

export interface ScheduleResult {
  seed: number;
  violation: Violation | null;
  /** The faults this run had (all of the scenario's, or the kept ones). */
  faults: Fault[];
  trace: string[];
  simulatedMs: number;
  stats: Checker["stats"];
}

export interface RunOptions {
  /** Indices into scenario.faults to keep (a shrunk schedule); all when absent. */
  keep?: readonly number[];
  trace?: boolean;
}

class World {
  readonly loop: EventLoop;
  readonly trace: Trace;
  readonly checker: Checker;
  readonly server: Server;
  readonly wire: Wire;
  readonly slots: SimProcess[] = [];
  readonly all: SimProcess[] = [];
  readonly #scenario: Scenario;
  /** Crash takeover: every process runs with it, and the kubelet model reports crashes. */
  readonly crashTakeover: boolean;
  readonly seed: number;
  readonly #restartProofs: boolean;
  readonly #lockNotExclusive: boolean;
  readonly #restartLocks = new Map<number, SimProcess>();
  readonly #gateIgnored: boolean;
  #generation = 0;

  constructor(scenario: Scenario, options: SimOptions, traceOn: boolean) {
    const { seed, timing } = scenario;
    this.#scenario = scenario;
    this.crashTakeover = scenario.crashTakeover;
    this.seed = seed;
    this.#restartProofs = options.sem.restartTakeover;
    this.#lockNotExclusive = options.restartLockNotExclusive ?? false;
    this.#gateIgnored = options.campaignGateIgnored ?? false;
    this.loop = new EventLoop(Rng.stream(seed, "wake-order"));
    this.trace = new Trace(traceOn);
    this.checker = new Checker(this.loop, this.trace, {
      keys: scenario.keys,
      callTimeoutMs: timing.callTimeoutMs,
      livenessBoundMs: scenario.livenessBoundMs,
      ignore: options.ignore,
    });
    const byName = (name: string) => this.all.find((p) => p.name === name);
    this.server = new Server(
      this.loop,
      Rng.stream(seed, "lock-order"),
      { sem: options.sem, statementTimeoutMs: options.serverTimeout ? timing.callTimeoutMs : null },
      {
        committed: (stmt, before) => this.checker.committed(stmt, before),
        finished: (stmt) => this.checker.finished(stmt, byName(stmt.from)?.exitedAtUs ?? null),
        notify: (key) => {
          for (const p of this.slots) if (!p.dead) p.feed.hear(key, "release");
        },
      },
    );
    this.wire = {
      loop: this.loop,
      server: this.server,
      trace: this.trace,
      rng: Rng.stream(seed, "network"),
      clientTimeoutUs: timing.callTimeoutMs * 1000,
    };
  }

  /** A process in the slot, started now: a new holder each time (a restarted container). */
  spawn(slot: number): void {
    const s = this.#scenario;
    const generation = this.#generation++;
    const name = generation < s.slots ? `p${slot}` : `p${slot}.${generation}`;
    const shared = s.sharedHolder && slot < 2 && generation < s.slots;
    // The slot is the pod and its restart lock is the kernel's: free only once its holder crashed
    // or exited. Overlapping crash faults can start a process beside a live one, which gets none.
    const lockHolder = this.#restartLocks.get(slot);
    const free = lockHolder === undefined || lockHolder.dead || this.#lockNotExclusive;
    const locked = this.#restartProofs && !shared && free;
    // Bound at the process's start: a later process of the slot binds later.
    const proof = locked ? `#r:${slot.toString(16).padStart(32, "0")}.${generation}` : "";
    // Under crash takeover the sidecar's own form (pod, 8 hex, proof): the report's matcher reads the pod from it.
    const holder = shared
      ? "shared"
      : s.crashTakeover
        ? `p${slot}-${generation.toString(16).padStart(8, "0")}${proof}`
        : `${name}-h${proof}`;
    const rate = clockRate(Rng.stream(s.seed, `rate:${name}`), s.clockRatePpm);
    const process = new SimProcess(
      {
        wire: this.wire,
        timing: s.timing,
        keys: s.keys,
        stopTimeoutMs: s.stopTimeoutMs,
        workIntervalMs: s.workIntervalMs,
        gated: !this.#gateIgnored,
        sessionTakeover: s.sessionTakeover,
        crashTakeover: s.crashTakeover,
        rng: Rng.stream(s.seed, `work:${name}`),
        watcher: this.checker,
      },
      slot,
      name,
      holder,
      this.loop.nowUs - Rng.stream(s.seed, `origin:${name}`).int(0, 5_000_000),
      rate,
    );
    this.slots[slot] = process;
    if (locked) this.#restartLocks.set(slot, process);
    this.all.push(process);
    this.checker.watch(process);
    this.trace.add(
      this.loop.nowUs,
      name,
      `starts as holder ${holder}, its clock ${Math.round((rate - 1) * 1e6)} ppm off the server's`,
    );
    this.loop.at(this.loop.nowUs, process, () => process.start());
  }

  campaigners(key: string): number {
    return this.slots.filter((p) => !p.dead && !p.stopping && p.electors.has(key)).length;
  }
}

export async function runSchedule(
  scenario: Scenario,
  options: SimOptions,
  run: RunOptions = {},
): Promise<ScheduleResult> {
  const keep = run.keep;
  const faults = keep ? keep.map((i) => scenario.faults[i] as Fault) : scenario.faults;
  const world = new World(scenario, options, run.trace ?? false);
  const { loop, checker, trace } = world;
  const startRng = Rng.stream(scenario.seed, "start");
  for (let slot = 0; slot < scenario.slots; slot++) {
    loop.at(startRng.int(0, 200_000), null, () => world.spawn(slot));
  }
  for (const fault of faults) scheduleFault(world, fault);
  const healUs = healMs(scenario, faults) * 1000;
  checker.healedAt(healUs);
  const endUs = healUs + (scenario.livenessBoundMs + 1_000) * 1000;
  // Once a leader is back, the schedule may end a lease and a renew interval after the heal: by
  // then whatever the faults left queued has committed and every earlier lease has run out.
  const quietUs = healUs + (scenario.timing.leaseDurationMs + scenario.timing.renewIntervalMs) * 1000;
  // Liveness is judged at these instants even if nothing else happens then.
  loop.at(healUs, null, () => {});
  loop.at(quietUs, null, () => {});
  loop.at(healUs + scenario.livenessBoundMs * 1000, null, () => {});
  const campaigners = (key: string) => world.campaigners(key);
  await loop.run(endUs, () => {
    checker.afterStep(campaigners);
    if (loop.nowUs >= quietUs && checker.live(campaigners)) loop.halt();
  });
  return {
    seed: scenario.seed,
    violation: checker.violation,
    faults,
    trace: trace.lines,
    simulatedMs: loop.nowUs / 1000,
    stats: checker.stats,
  };
}

function scheduleFault(world: World, fault: Fault): void {
  const { loop, server, trace } = world;
  const at = fault.atMs * 1000;
  const note = (text: string) => trace.add(loop.nowUs, "FAULT", text);
  loop.at(at, null, () => note(describeFault(fault)));
  switch (fault.kind) {
    case "pause":
    case "stop":
    case "crash":
    case "unfit":
      scheduleProcessFault(world, fault);
      return;
    case "link":
    case "notices":
      scheduleLinkFault(world, fault);
      return;
    case "session-stall":
      scheduleSessionStall(world, fault);
      return;
    case "commit-stall":
      loop.at(at, null, () => server.startStall(fault.how));
      loop.at(at + fault.forMs * 1000, null, () => {
        note(`commit stall (${fault.how}) ends`);
        server.endStall(fault.how);
      });
      return;
    case "row-lock":
      loop.at(at, null, () => server.holdRowLock(fault.key, fault.forMs * 1000));
      return;
    case "forged-notice":
      loop.at(at, null, () => {
        for (const p of world.slots) if (!p.dead) p.feed.hear(fault.key, "forged");
      });
      return;
    case "clock-step":
      loop.at(at, null, () => {
        server.clockOffsetUs += fault.byMs * 1000;
      });
      return;
    case "row-delete":
      loop.at(at, null, () =>
        server.submit(
          { kind: "delete", key: fault.key },
          "operator",
          { sentUs: at, deadlineUs: at },
          () => {},
        ),
      );
      return;
  }
}

/** Aimed at whichever process runs in the slot when the fault strikes. */
function scheduleProcessFault(
  world: World,
  fault: Extract<Fault, { kind: "pause" | "stop" | "crash" | "unfit" }>,
): void {
  const { loop, trace } = world;
  const at = fault.atMs * 1000;
  const slot = () => world.slots[fault.slot];
  switch (fault.kind) {
    case "pause":
      loop.at(at, null, () => {
        const p = slot();
        if (p) p.frozenUntil = Math.max(p.frozenUntil, at + fault.forMs * 1000);
      });
      return;
    case "stop":
      loop.at(at, null, () => {
        const p = slot();
        if (!p || p.dead || p.stopping) return;
        // The process's own event: stop() starts promise chains.
        loop.at(loop.nowUs, p, () => {
          p.stop().then(() => trace.add(loop.nowUs, p.name, `exited at ${fmtTime(loop.nowUs)}`));
        });
      });
      return;
    case "crash":
      loop.at(at, null, () => {
        const victim = slot();
        if (!victim || victim.dead) return;
        victim.crash();
        if (world.crashTakeover) reportCrash(world, fault, victim);
      });
      loop.at(at + fault.restartAfterMs * 1000, null, () => world.spawn(fault.slot));
      return;
    case "unfit": {
      // The process's own events: the gate's listeners start promise chains in it.
      let target: SimProcess | undefined;
      loop.at(at, null, () => {
        target = slot();
        const p = target;
        if (p && !p.dead) loop.at(loop.nowUs, p, () => p.closeGate("application unready"));
      });
      loop.at(at + fault.forMs * 1000, null, () => {
        const p = target;
        if (p && !p.dead) loop.at(loop.nowUs, p, () => p.openGate());
      });
      return;
    }
  }
}

/**
 * The notice backend of the process in the slot stalls. Past detectMs its feed, in the process's
 * own turn (later if the process is paused then), gives the session up, which the electors hear
 * before the socket closes; a second later it reconnects on a new backend. The stalled backend
 * exits once it runs again and reads the closed socket.
 */
function scheduleSessionStall(world: World, fault: Extract<Fault, { kind: "session-stall" }>): void {
  const { loop } = world;
  const at = fault.atMs * 1000;
  const untilUs = at + fault.forMs * 1000;
  loop.at(at, null, () => {
    const p = world.slots[fault.slot];
    const stalled = p && !p.dead ? p.feed.stall(untilUs) : null;
    if (!p || stalled === null || fault.detectMs >= fault.forMs) return;
    loop.at(at + fault.detectMs * 1000, p, () => {
      // Gone already: the process exited, or its session was replaced meanwhile.
      if (p.dead || p.feed.session !== stalled) return;
      p.feed.abandonSession();
      loop.at(loop.nowUs + SESSION_RECONNECT_MS * 1000, p, () => {
        if (p.dead || p.feed.session !== null) return;
        p.feed.openSession();
        p.feed.setDown(false);
      });
    });
  });
}

function scheduleLinkFault(world: World, fault: Extract<Fault, { kind: "link" | "notices" }>): void {
  const { loop } = world;
  const at = fault.atMs * 1000;
  let undo: (() => void) | null = null;
  loop.at(at, null, () => {
    const p = world.slots[fault.slot];
    if (!p) return;
    const extra = fault.delayMs * 1000;
    if (fault.kind === "notices") {
      const { feed } = p;
      const n = feed.notices;
      if (fault.mode === "lose") n.lose++;
      else if (fault.mode === "down") feed.setDown(true);
      else n.extraDelayUs += extra;
      undo = () => {
        if (fault.mode === "lose") n.lose--;
        else if (fault.mode === "down") feed.setDown(false);
        else n.extraDelayUs -= extra;
      };
      return;
    }
    const link = p.link;
    if (fault.mode === "drop-requests") link.dropRequests++;
    else if (fault.mode === "drop-answers") link.dropAnswers++;
    else if (fault.mode === "reset") link.reset++;
    else link.extraDelayUs += extra;
    undo = () => {
      if (fault.mode === "drop-requests") link.dropRequests--;
      else if (fault.mode === "drop-answers") link.dropAnswers--;
      else if (fault.mode === "reset") link.reset--;
      else link.extraDelayUs -= extra;
    };
  });
  loop.at(at + fault.forMs * 1000, null, () => undo?.());
}

/** A process's clock rate within ±bound ppm: a third of them at either edge, where it matters most. */
function clockRate(rng: Rng, boundPpm: number): number {
  const r = rng.next();
  const off = r < 1 / 3 ? -1 : r < 2 / 3 ? 1 : rng.next() * 2 - 1;
  return 1 + (off * boundPpm) / 1e6;
}

/**
 * The kubelet model (crash takeover): the crashed run's status, with the message its process left
 * (only a holder with a restart proof writes one), reaches every live peer's view 0–4 s later —
 * often after the container restarted, so the report names an older run than the one leading then.
 * Beside it comes a forged report naming a live holder: in another pod's status, and in its own
 * pod's status for another container. The sidecar's matcher must take neither.
 */
function reportCrash(world: World, fault: Extract<Fault, { kind: "crash" }>, victim: SimProcess): void {
  const { loop } = world;
  const rng = Rng.stream(world.seed, `kubelet:${fault.slot}:${fault.atMs}`);
  const message = victim.holder.includes(RESTART_PROOF_MARKER) ? terminationMessage(victim.holder) : "";
  const status = (pod: string, container: string, text: string): Pod => ({
    metadata: { name: pod },
    status: {
      initContainerStatuses: [
        {
          name: container,
          ready: false,
          state: { waiting: { reason: "CrashLoopBackOff" } },
          lastState: { terminated: { exitCode: 137, reason: "Error", ...(text ? { message: text } : {}) } },
        },
      ],
    },
  });
  const deliver = (pod: Pod) => {
    for (const p of world.slots) {
      if (!p || p.dead) continue;
      loop.at(loop.nowUs + latencyUs(rng), p, () => p.peerStatus(pod));
    }
  };
  loop.at(loop.nowUs + rng.int(0, 4_000) * 1000, null, () => {
    deliver(status(`p${fault.slot}`, "pglease", message));
    const live = world.slots.filter((p) => p && !p.dead && p.holder.includes(RESTART_PROOF_MARKER));
    const target = live.length > 0 ? live[rng.int(0, live.length - 1)] : undefined;
    if (!target) return;
    const forged = terminationMessage(target.holder);
    deliver(status(`p${(target.slot + 1) % world.slots.length}`, "pglease", forged));
    deliver(status(`p${target.slot}`, "app", forged));
  });
}
