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
] as const;

/** Only with a primary and a standby (`--failover`, failover.ts); the default kinds there. */
export const FAILOVER_FAULT_KINDS = ["pg-failover", "pg-failover-lagging"] as const;

export type SingleFaultKind = (typeof SINGLE_FAULT_KINDS)[number] | (typeof FAILOVER_FAULT_KINDS)[number];
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
}

export interface PlannedSlot {
  index: number;
  kind: FaultKind;
  /** Offset from the start of the chaos phase. */
  startMs: number;
  faults: PlannedFault[];
  /** When the last fault of the slot heals, from the slot's start. */
  healMs: number;
  /** Quiet time after the heal: the liveness bound plus a margin, so each recovery is seen alone. */
  settleMs: number;
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
  };
}

/** One fault, or two that overlap in time; `atLeader` aims the (first) one at the leader. */
function slotFaults(
  random: Random,
  shape: ScheduleShape,
  kind: FaultKind,
  atLeader: boolean,
): PlannedFault[] {
  if (kind !== "two-at-once") return [planFault(random, shape, kind, 0, atLeader)];
  const [first, second] = shuffled(random, SINGLE_FAULT_KINDS).slice(0, 2) as [
    SingleFaultKind,
    SingleFaultKind,
  ];
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

export function planSchedule(shape: ScheduleShape): PlannedSlot[] {
  const random = seededRandom(shape.seed);
  const kinds = shape.kinds ?? FAULT_KINDS;
  if (kinds.length === 0) throw new Error("schedule: at least one fault kind is needed");
  const settleMs = shape.leaseMs + 1_000 + 1_500;
  const slots: PlannedSlot[] = [];
  // Every kind once at the leader, in a seeded order, then seeded picks at any target: a short
  // run still sees each kind where it hurts.
  const queue = shuffled(random, kinds);
  let startMs = 0;
  for (let index = 0; ; index++) {
    const kind = queue[index] ?? pick(random, kinds);
    const faults = slotFaults(random, shape, kind, index < queue.length);
    const healMs = Math.max(...faults.map((f) => f.delayMs + f.durationMs + allowanceMs(f, shape.leaseMs)));
    if (startMs + healMs + settleMs > shape.durationMs) break;
    slots.push({ index, kind, startMs, faults, healMs, settleMs });
    startMs += healMs + settleMs;
  }
  return slots;
}
