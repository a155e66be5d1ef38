// The fault schedule: a pure function of the seed and the run's shape, so the same seed replays
// the same faults in the same order with the same durations. Who a fault hits is resolved at run
// time ("the leader" is whoever leads then); only the fallback choice is drawn here.

export const SINGLE_FAULT_KINDS = [
  "sigkill",
  "sigstop",
  "loop-block",
  "db-cut",
  "db-delay",
  "db-blackhole",
  "pg-restart",
  "api-500",
  "api-hang",
  "api-unreachable",
  "pod-restart",
  "commit-stall",
  "row-lock",
  "row-delete",
  "table-drop",
  "listen-kill",
  "listen-blackhole",
  "clock-step",
  "app-unready",
  "handover",
  "handover-target-dies",
] as const;

/** Only with a primary and a standby (`--failover`, failover.ts); the default kinds there. */
export const FAILOVER_FAULT_KINDS = ["pg-failover", "pg-failover-lagging"] as const;

/** Only with `--session-takeover` (session-fault.ts): there they join every other kind. */
export const SESSION_FAULT_KINDS = ["leader-session-kill", "leader-session-stall"] as const;

/** Only with `--crash-takeover` (crash-fault.ts): there it joins every other kind. */
export const CRASH_FAULT_KINDS = ["leader-crash-reported"] as const;

export type SingleFaultKind =
  | (typeof SINGLE_FAULT_KINDS)[number]
  | (typeof FAILOVER_FAULT_KINDS)[number]
  | (typeof SESSION_FAULT_KINDS)[number]
  | (typeof CRASH_FAULT_KINDS)[number];
export type FaultKind = SingleFaultKind | "two-at-once";
export const FAULT_KINDS: readonly FaultKind[] = [...SINGLE_FAULT_KINDS, "two-at-once"];

export interface PlannedFault {
  kind: SingleFaultKind;
  /** "leader": whoever leads when the fault starts (else `fallback`); "replica": `fallback` itself. */
  target: "leader" | "replica";
  /** Replica index used when the target is "replica", or when nobody leads. */
  fallback: number;
  /** Offset from the slot's start. */
  delayMs: number;
  durationMs: number;
  /** sigstop: the whole pod (sidecar and workload) or the sidecar alone. */
  scope: "pod" | "sidecar";
  /** db-delay: added to every chunk, each way. */
  latencyMs: number;
  /** pg-restart: a crash-like immediate stop (recovered from the WAL) or a fast shutdown. */
  restartMode: "fast" | "immediate";
  /** clock-step: the server clock's step at the start (undone at the heal), ms; negative: back. */
  stepMs: number;
  /**
   * leader-session-kill: the session killed while the leader runs ("plain"), while its pod or
   * sidecar is SIGSTOPped for durationMs ("paused"), or while its renew waits on the lease row's
   * lock ("renew-queued").
   */
  sessionKill: SessionKillMode;
}

export const SESSION_KILL_MODES = ["plain", "paused", "renew-queued"] as const;
export type SessionKillMode = (typeof SESSION_KILL_MODES)[number];

export interface PlannedSlot {
  index: number;
  kind: FaultKind;
  /** Offset from the start of the chaos phase. */
  startMs: number;
  faults: PlannedFault[];
  /** When the last fault of the slot heals, from the slot's start. */
  healMs: number;
  /**
   * Quiet time after the heal, at most: the liveness bound plus a margin. The run goes on sooner,
   * after `minSettleMs`, once it sees a labelled, running leader: each recovery is still seen alone.
   */
  settleMs: number;
  minSettleMs: number;
}

export interface ScheduleShape {
  seed: string;
  durationMs: number;
  replicas: number;
  leaseMs: number;
  renewMs: number;
  /** How long an injected event-loop block lasts (fixed per run: the preload reads it at start). */
  blockMs: number;
  /** Restrict the kinds drawn (default: all). */
  kinds?: readonly FaultKind[];
}

/**
 * The replicas' --health-grace: a leader whose application stays unready this long hands over.
 * A third of the lease, so a handover is seen well within a slot; never below the retry interval.
 */
export const healthGraceOf = (leaseMs: number) => Math.round(leaseMs / 3);
/** The replicas' --health-settle: how long a pod that handed over waits, ready, before campaigning. */
export const healthSettleOf = (leaseMs: number) => leaseMs;

/** mulberry32 over a 32-bit FNV-1a hash of the seed text: small, fast, and the same everywhere. */
export function seededRandom(seed: string): () => number {
  let state = 0x811c9dc5;
  for (const char of seed) state = Math.imul(state ^ char.charCodeAt(0), 0x01000193) >>> 0;
  return () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4_294_967_296;
  };
}

type Random = () => number;
const between = (random: Random, low: number, high: number) => Math.round(low + random() * (high - low));
const pick = <T>(random: Random, items: readonly T[]): T => items[Math.floor(random() * items.length)] as T;

function shuffled<T>(random: Random, items: readonly T[]): T[] {
  const out = [...items];
  for (let i = out.length - 1; i > 0; i--) {
    const j = Math.floor(random() * (i + 1));
    [out[i], out[j]] = [out[j] as T, out[i] as T];
  }
  return out;
}

function planFault(
  random: Random,
  shape: ScheduleShape,
  kind: SingleFaultKind,
  delayMs: number,
  atLeader: boolean,
): PlannedFault {
  const { leaseMs, renewMs } = shape;
  // Drawn for this kind alone: the schedules of runs without it stay what they were.
  const sessionKill = kind === "leader-session-kill" ? pick(random, SESSION_KILL_MODES) : "plain";
  const durations: Record<SingleFaultKind, () => number> = {
    sigkill: () => between(random, 300, leaseMs * 1.5),
    // Longer than the lease: the others must take over while it sleeps.
    sigstop: () => between(random, leaseMs * 1.25, leaseMs * 2),
    "loop-block": () => shape.blockMs,
    "db-cut": () => between(random, 500, leaseMs * 2),
    "db-delay": () => between(random, leaseMs, leaseMs * 2.5),
    "db-blackhole": () => between(random, 500, leaseMs * 2),
    // The pause between the stop and the start; the start itself adds its own time.
    "pg-restart": () => between(random, 0, leaseMs * 0.75),
    // The primary's downtime before the standby is promoted: how long failure detection took.
    "pg-failover": () => between(random, 0, leaseMs * 0.5),
    "pg-failover-lagging": () => between(random, 0, leaseMs * 0.5),
    "api-500": () => between(random, 500, leaseMs * 2),
    "api-hang": () => between(random, 500, leaseMs * 2),
    "api-unreachable": () => between(random, 500, leaseMs * 2),
    // A kubelet restarts a dead container at once: the new holder finds the old term still live.
    "pod-restart": () => between(random, 50, 300),
    "commit-stall": () => between(random, 500, leaseMs * 2),
    "row-lock": () => between(random, 500, leaseMs * 2),
    "row-delete": () => 0,
    // How long the table stays gone before the migration makes it again.
    "table-drop": () => between(random, 100, leaseMs),
    "listen-kill": () => 0,
    // Past the feed's ping interval (one lease) plus its timeout (2 s), sometimes: it must notice by itself.
    "listen-blackhole": () => between(random, leaseMs, 8_000),
    "clock-step": () => between(random, leaseMs, leaseMs * 2),
    // Past the grace period: the leader must hand over, then take its application back.
    "app-unready": () => between(random, healthGraceOf(leaseMs) * 1.25, healthGraceOf(leaseMs) * 3),
    handover: () => 0,
    // The target stays dead past the reservation (one lease): someone else must take the lease.
    "handover-target-dies": () => between(random, leaseMs * 1.25, leaseMs * 2),
    // The pause: within the documented window (renew interval + call timeout) or well past it.
    "leader-session-kill": () => (sessionKill === "paused" ? between(random, 200, leaseMs * 2) : 0),
    // Mostly past the feed's ping interval (the sidecar's lease) plus its timeout (2 s): the
    // holder gives the session up while the server still lists it.
    "leader-session-stall": () => between(random, 2_000, leaseMs + 2_000 + 3_000),
    // The back-off before the kubelet restarts the crashed sidecar: past the lease, so the
    // kubelet's report, not the restart, is what can hand the lease over before the expiry.
    "leader-crash-reported": () => between(random, leaseMs * 1.25, leaseMs * 3),
  };
  const durationMs = durations[kind]();
  // Most faults hit the leader, where they hurt; some hit any replica, which must not hurt at all.
  const target = atLeader || random() < 0.75 ? "leader" : "replica";
  return {
    kind,
    target,
    fallback: between(random, 0, shape.replicas - 1),
    delayMs,
    durationMs,
    scope: random() < 0.5 ? "pod" : "sidecar",
    // Above the renew interval each way: every renew round trip misses its tick.
    latencyMs: renewMs + between(random, 50, renewMs),
    restartMode: random() < 0.5 ? "immediate" : "fast",
    // Half beyond the safety margin (one renew interval), a few seconds; half well within it.
    stepMs:
      (random() < 0.5 ? -1 : 1) *
      (random() < 0.5 ? between(random, 2_000, 4_000) : between(random, 100, renewMs * 0.6)),
    sessionKill,
  };
}

const INSTANT = new Set<SingleFaultKind>(["row-delete", "listen-kill", "handover"]);

/** Faults of the one shared database: two at once would mostly test each other. */
const SHARED_DATABASE = new Set<SingleFaultKind>([
  "pg-restart",
  "commit-stall",
  "row-lock",
  "row-delete",
  "table-drop",
  "clock-step",
]);
/** End a term on the server without telling its holder, which learns it at its next renew. */
export const ABRUPT_ENDS = new Set<SingleFaultKind>(["row-delete", "table-drop", "clock-step"]);
/** They hold the holder's next renew back, so it would learn of an abrupt end later than that. */
const SLOW_RENEW = new Set<SingleFaultKind>(["db-cut", "db-delay", "db-blackhole"]);

/** The sidecar learns its application's health through the API: a faulty API link hides it. */
const API_LINK = new Set<SingleFaultKind>(["api-500", "api-hang", "api-unreachable"]);

export function pairable(a: SingleFaultKind, b: SingleFaultKind): boolean {
  if (a === b || (SHARED_DATABASE.has(a) && SHARED_DATABASE.has(b))) return false;
  if ((a === "app-unready" && API_LINK.has(b)) || (b === "app-unready" && API_LINK.has(a))) return false;
  return !((ABRUPT_ENDS.has(a) && SLOW_RENEW.has(b)) || (ABRUPT_ENDS.has(b) && SLOW_RENEW.has(a)));
}

/** One fault, or two that overlap in time; `atLeader` aims the (first) one at the leader. */
function slotFaults(
  random: Random,
  shape: ScheduleShape,
  kind: FaultKind,
  atLeader: boolean,
): PlannedFault[] {
  if (kind !== "two-at-once") return [planFault(random, shape, kind, 0, atLeader)];
  const order = shuffled(random, SINGLE_FAULT_KINDS);
  // An instant fault (over when injected) comes second, inside the first one's time.
  const first = order.find((kind) => !INSTANT.has(kind)) as SingleFaultKind;
  const second = order.find((kind) => pairable(first, kind)) as SingleFaultKind;
  const a = planFault(random, shape, first, 0, atLeader);
  // The second starts while the first is still on.
  const b = planFault(random, shape, second, between(random, 0, Math.floor(a.durationMs / 2)), false);
  return [a, b];
}

/** Restart allowance for pg-restart: the server's own start time is not in durationMs. */
const PG_START_ALLOWANCE_MS = 1_500;

/** Allowance for a failover: the promotion, then a new standby's base backup, start and streaming. */
const FAILOVER_ALLOWANCE_MS = 4_000;

/** What a fault takes beyond durationMs: a server's start, or a promotion and a new standby. */
function allowanceMs(fault: PlannedFault, leaseMs: number): number {
  if (fault.kind === "pg-restart") return PG_START_ALLOWANCE_MS;
  if (fault.kind === "pg-failover") return FAILOVER_ALLOWANCE_MS;
  // The lagging standby's failover first waits (at most twice the lease) for a claim on the primary alone.
  if (fault.kind === "pg-failover-lagging") return FAILOVER_ALLOWANCE_MS + 2 * leaseMs + 1_000;
  return 0;
}

/** Share of the slots after the first pass that are two faults at once. */
const PAIR_SHARE = 0.3;
/** Share of the single faults after the first pass that kill the leader's session, when it is a kind. */
const SESSION_KILL_SHARE = 0.25;

/** The mode's own faults come often enough to be seen in every variant, among the 20-odd others. */
function pickSingle(random: Random, singles: readonly SingleFaultKind[]): SingleFaultKind {
  // Drawn only where it is a kind: runs without it keep their schedules.
  if (singles.includes("leader-crash-reported") && random() < SESSION_KILL_SHARE)
    return "leader-crash-reported";
  if (singles.includes("leader-session-kill") && random() < SESSION_KILL_SHARE) {
    // The stall joins the draw only where it is a kind: runs without it keep their schedules.
    return singles.includes("leader-session-stall") && random() < 0.5
      ? "leader-session-stall"
      : "leader-session-kill";
  }
  return pick(random, singles);
}

/**
 * Slots until the duration would be over if every recovery were as quick as `minSettleMs` allows:
 * the run plays them in order and stops at the first that no longer fits in the time it has left.
 */
export function planSchedule(shape: ScheduleShape): PlannedSlot[] {
  const random = seededRandom(shape.seed);
  const kinds = shape.kinds ?? FAULT_KINDS;
  if (kinds.length === 0) throw new Error("schedule: at least one fault kind is needed");
  const settleMs = shape.leaseMs + 1_000 + 1_500;
  // Long enough for a holder whose term was ended on the server to hear of it at its next renew.
  const minSettleMs = Math.round(shape.leaseMs / 2);
  const singles = kinds.filter((k): k is SingleFaultKind => k !== "two-at-once");
  const slots: PlannedSlot[] = [];
  // Every kind once at the leader, in a seeded order, then seeded picks at any target: a short
  // run still sees each kind where it hurts.
  const queue = shuffled(random, kinds);
  let startMs = 0;
  for (let index = 0; ; index++) {
    const pair = kinds.includes("two-at-once") && (singles.length === 0 || random() < PAIR_SHARE);
    const kind = queue[index] ?? (pair ? "two-at-once" : pickSingle(random, singles));
    const faults = slotFaults(random, shape, kind, index < queue.length);
    const healMs = Math.max(...faults.map((f) => f.delayMs + f.durationMs + allowanceMs(f, shape.leaseMs)));
    if (startMs + healMs + minSettleMs > shape.durationMs) break;
    slots.push({ index, kind, startMs, faults, healMs, settleMs, minSettleMs });
    startMs += healMs + minSettleMs;
  }
  return slots;
}
