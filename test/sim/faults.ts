// The fault catalogue: what can go wrong, drawn from the seed as a list the shrinker can cut.
// Processes are named by slot: a fault aimed at slot 1 hits whichever process runs there then
// (a crashed process is restarted in its slot under a new holder).
import type { Rng } from "./prng.ts";

export type Fault =
  /** SIGSTOP, a long GC or a blocked event loop: nothing of the process runs; the clock runs on. */
  | { kind: "pause"; slot: number; atMs: number; forMs: number }
  /** Commits wait: a synchronous standby gone ("sync", statement_timeout cuts it short) or fsync. */
  | { kind: "commit-stall"; how: "sync" | "fsync"; atMs: number; forMs: number }
  /** Another session holds the lease row FOR UPDATE. */
  | { kind: "row-lock"; key: string; atMs: number; forMs: number }
  | {
      kind: "link";
      slot: number;
      mode: "drop-requests" | "drop-answers" | "reset" | "delay";
      atMs: number;
      forMs: number;
      delayMs: number;
    }
  | {
      kind: "notices";
      slot: number;
      /** lose: silently, the feed still looks healthy; down: the feed knows (a failed ping, a drop). */
      mode: "lose" | "delay" | "down";
      atMs: number;
      forMs: number;
      delayMs: number;
    }
  /** Anyone who can connect can NOTIFY the channel. */
  | { kind: "forged-notice"; key: string; atMs: number }
  /** SIGTERM: stop() and exit; not restarted. */
  | { kind: "stop"; slot: number; atMs: number }
  /** SIGKILL, then the container restarts as a new holder. */
  | { kind: "crash"; slot: number; atMs: number; restartAfterMs: number }
  /** The database server's wall clock steps (family "clock"). */
  | { kind: "clock-step"; atMs: number; byMs: number }
  /** An operator DELETEs the lease row (family "delete"). */
  | { kind: "row-delete"; key: string; atMs: number }
  /** The process's campaign gate closes (its application turns unready), then opens again. */
  | { kind: "unfit"; slot: number; atMs: number; forMs: number }
  /**
   * Session takeover (family "session-takeover"): the process's notice backend stalls for forMs
   * (SIGSTOP, a loaded server, a network stall). If that outlasts detectMs (the feed's ping and its
   * timeout), the feed gives the session up and reconnects a second later; the backend exits once
   * it runs again and reads the closed socket.
   */
  | { kind: "session-stall"; slot: number; atMs: number; forMs: number; detectMs: number };

export type FaultKind = Fault["kind"];

/** Fault families: the default ones a correct pglease must survive; the others break a stated assumption. */
export const DEFAULT_FAMILIES: readonly FaultKind[] = [
  "pause",
  "commit-stall",
  "row-lock",
  "link",
  "notices",
  "forged-notice",
  "stop",
  "crash",
];
export const OPTIONAL_FAMILIES = [
  "clock-step",
  "row-delete",
  "unfit",
  "shared-holder",
  "session-takeover",
  "crash-takeover",
] as const;
/**
 * "session-takeover": every process runs with it (crashes end sessions), and "session-stall" is drawn.
 * "crash-takeover": every process runs with it; a crash is reported by the kubelet model, late or
 * soon, and each report comes with a forged one (schedule.ts, reportCrash).
 */
export type Family = FaultKind | "shared-holder" | "session-takeover" | "crash-takeover";

/** How long a session-stall keeps the feed down after it gave the session up: its reconnect delay. */
export const SESSION_RECONNECT_MS = 1_000;

/** When the fault is over: liveness is judged from the last of these. */
export function healsAtMs(fault: Fault, stopBudgetMs: number): number {
  switch (fault.kind) {
    case "forged-notice":
    case "clock-step":
    case "row-delete":
      return fault.atMs;
    case "stop":
      return fault.atMs + stopBudgetMs;
    case "crash":
      return fault.atMs + fault.restartAfterMs;
    case "session-stall":
      return fault.atMs + fault.forMs + SESSION_RECONNECT_MS;
    default:
      return fault.atMs + fault.forMs;
  }
}

const WEIGHTS: Record<FaultKind, number> = {
  pause: 3,
  "commit-stall": 4,
  "row-lock": 2,
  link: 4,
  notices: 1,
  "forged-notice": 1,
  stop: 1,
  crash: 1,
  "clock-step": 2,
  "row-delete": 1,
  unfit: 2,
  "session-stall": 3,
};

export interface FaultSpace {
  slots: number;
  keys: readonly string[];
  families: ReadonlySet<Family>;
  /** Faults start within [0.5 s, this]. */
  windowMs: number;
}

export function drawFaults(rng: Rng, space: FaultSpace): Fault[] {
  const drawn = (k: FaultKind) =>
    space.families.has(k) || (k === "session-stall" && space.families.has("session-takeover"));
  const kinds = (Object.keys(WEIGHTS) as FaultKind[]).filter(drawn);
  if (kinds.length === 0) return [];
  const total = kinds.reduce((sum, k) => sum + WEIGHTS[k], 0);
  const count = rng.int(1, 6);
  const faults: Fault[] = [];
  // One slot never stops for good, so someone is left to lead.
  const stoppable = new Set(Array.from({ length: space.slots - 1 }, (_, i) => i + 1));
  for (let i = 0; i < count; i++) {
    const kind = weighted(kinds, rng.next() * total);
    const fault = drawOne(rng, kind, space, stoppable);
    if (fault) faults.push(fault);
  }
  return faults.sort((a, b) => a.atMs - b.atMs);
}

function weighted(kinds: FaultKind[], r: number): FaultKind {
  let left = r;
  for (const kind of kinds) {
    left -= WEIGHTS[kind];
    if (left < 0) return kind;
  }
  return kinds[kinds.length - 1] as FaultKind;
}

function drawOne(rng: Rng, kind: FaultKind, space: FaultSpace, stoppable: Set<number>): Fault | null {
  const atMs = rng.int(500, space.windowMs);
  const slot = rng.int(0, space.slots - 1);
  const key = rng.pick(space.keys);
  const forMs = rng.pick([rng.int(50, 600), rng.int(600, 2500), rng.int(2500, 6000)]);
  switch (kind) {
    case "pause":
      return { kind, slot, atMs, forMs };
    case "commit-stall":
      return { kind, how: rng.chance(0.75) ? "sync" : "fsync", atMs, forMs };
    case "row-lock":
      return { kind, key, atMs, forMs };
    case "link": {
      const mode = rng.pick(["drop-requests", "drop-answers", "reset", "delay"] as const);
      return { kind, slot, mode, atMs, forMs, delayMs: mode === "delay" ? rng.int(100, 1500) : 0 };
    }
    case "notices": {
      const mode = rng.pick(["lose", "delay", "down"] as const);
      return { kind, slot, mode, atMs, forMs, delayMs: mode === "delay" ? rng.int(100, 3000) : 0 };
    }
    case "forged-notice":
      return { kind, key, atMs };
    case "stop": {
      const candidates = [...stoppable];
      if (candidates.length === 0) return null;
      const target = rng.pick(candidates);
      stoppable.delete(target);
      return { kind, slot: target, atMs };
    }
    case "crash":
      return { kind, slot, atMs, restartAfterMs: rng.int(300, 3000) };
    case "clock-step":
      return { kind, atMs, byMs: (rng.chance(0.5) ? -1 : 1) * rng.int(100, 5000) };
    case "row-delete":
      return { kind, key, atMs };
    case "unfit":
      return { kind, slot, atMs, forMs };
    case "session-stall":
      return { kind, slot, atMs, forMs, detectMs: rng.int(100, 4_000) };
  }
}

export function describeFault(fault: Fault): string {
  const at = `at ${(fault.atMs / 1000).toFixed(3)}s`;
  switch (fault.kind) {
    case "pause":
      return `pause slot ${fault.slot} ${at} for ${fault.forMs} ms`;
    case "commit-stall":
      return `commit stall (${fault.how}) ${at} for ${fault.forMs} ms`;
    case "row-lock":
      return `row lock on ${fault.key} ${at} for ${fault.forMs} ms`;
    case "link":
      return `link ${fault.mode}${fault.delayMs ? ` +${fault.delayMs} ms` : ""} slot ${fault.slot} ${at} for ${fault.forMs} ms`;
    case "notices":
      return `notices ${fault.mode}${fault.delayMs ? ` +${fault.delayMs} ms` : ""} slot ${fault.slot} ${at} for ${fault.forMs} ms`;
    case "forged-notice":
      return `forged release notice for ${fault.key} ${at}`;
    case "stop":
      return `stop slot ${fault.slot} ${at}`;
    case "crash":
      return `crash slot ${fault.slot} ${at}, restart after ${fault.restartAfterMs} ms`;
    case "clock-step":
      return `server clock steps ${fault.byMs > 0 ? "+" : ""}${fault.byMs} ms ${at}`;
    case "row-delete":
      return `DELETE row ${fault.key} ${at}`;
    case "unfit":
      return `campaign gate of slot ${fault.slot} closed ${at} for ${fault.forMs} ms`;
    case "session-stall":
      return `notice backend of slot ${fault.slot} stalled ${at} for ${fault.forMs} ms (the feed gives up after ${fault.detectMs} ms)`;
  }
}
