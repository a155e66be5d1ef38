// What a chaos run records, as plain data: the checker is a pure function of this. Every time
// is milliseconds since the epoch on this machine's clock, which the replicas' log lines, the
// workloads, the fault injector and the label recorder all share.
import type { FaultKind, SingleFaultKind } from "./schedule.ts";

/** One `pglease run` process. A restart is a new incarnation with a new holder identity. */
export interface Incarnation {
  replica: string;
  pid: number;
  /** From its first log line; null if it died before saying. */
  holder: string | null;
  startedAt: number;
  /** When it died (SIGKILL sent, or its exit seen); null while it ran to the end of the window. */
  endedAt: number | null;
}

/** A log line with an election outcome (acquired, renewed, lost, stepped-down, released, …). */
export interface Transition {
  pid: number;
  time: number;
  outcome: string;
  fence: number | null;
  /** The lease it is about (the line's `lease`); absent in older recordings: the primary lease. */
  key?: string;
}

/** A window in which a process could not run: SIGSTOPped, or its event loop blocked. */
export interface Pause {
  pid: number;
  kind: "sigstop" | "loop-block";
  from: number;
  /** When it could run again; null if it never did within the window (killed while paused). */
  to: number | null;
}

/** A row of the lease table's change log, in commit order (one per claim, renew, release). */
export interface LeaseRow {
  seq: number;
  key: string;
  holder: string;
  fence: number;
  /** Server time of the term's start, ms. */
  acquiredAt: number;
  /** The expiry this statement wrote, server time, ms. */
  expiresAt: number;
  /** The server's clock when the row was written (the trigger's clock_timestamp()), ms. */
  loggedAt: number;
  /**
   * Session takeover: the row replaced a term that had recorded its holder's session, and the
   * server found that session gone inside this claim's transaction (the trigger's own check).
   */
  tookGoneSession?: boolean;
}

/**
 * A holder's recorded session that ended while the server kept running: it ended after `from`
 * and before `to` (a kill's send and its answer, or the session watch's last sight of it alive
 * and its first of it gone). From then on a follower may take the term over (session takeover).
 */
export interface SessionEnd {
  holder: string;
  fence: number;
  from: number;
  to: number;
}

/** A row the workload wrote, in commit order (seq). */
export interface AcceptedWrite {
  seq: number;
  replica: string;
  fence: number;
  issuedAt: number;
}

export interface RejectedWrite {
  replica: string;
  fence: number;
  currentFence: number | null;
  time: number;
}

/** The role label of one pod after one change in the API server, in resourceVersion order. */
export interface LabelChange {
  resourceVersion: number;
  time: number;
  pod: string;
  role: string | null;
}

/**
 * The application container's ready flag in a pod's status, as the kubelet (here the app-unready
 * fault) wrote it; the time is when the API server had stored it. Every pod starts ready.
 */
export interface AppReadiness {
  pod: string;
  time: number;
  ready: boolean;
}

export interface InjectedFault {
  kind: SingleFaultKind;
  /** The replica it hit and its role then, e.g. "chaos-1 (leader)"; null for the shared database. */
  target: string | null;
  startedAt: number;
  healedAt: number;
  detail: string;
  /**
   * When the server ended the live term without its holder hearing of it (the row deleted or its
   * table dropped, the server clock stepped forward past the safety margin): from just before the
   * statement was sent to just after its answer. The holder learns it from its next answer.
   */
  serverEnded?: { from: number; to: number }[];
  /** The recorded sessions this fault ended, when it knows (leader-session-kill). */
  sessionEnded?: SessionEnd[];
  /**
   * Terms whose recorded session this fault stalled (leader-session-stall): if that session ends,
   * its holder gave it up first (its ping timed out), so its end excuses no believer.
   */
  sessionStalled?: Array<{ holder: string; fence: number }>;
}

export interface Slot {
  index: number;
  kind: FaultKind;
  startedAt: number;
  /** When the last of its faults healed. */
  healedAt: number;
  faults: InjectedFault[];
}

export interface History {
  /** The lease key, which is also the guarded resource. */
  lease: string;
  /**
   * Leases every replica also campaigns for, so a process often holds several and renews and
   * releases them through the batched statements: judged on the lease rules and on beliefs
   * (no workload writes under them, and no label shows them).
   */
  extraLeases?: string[];
  leaseMs: number;
  /**
   * The fault phase: slots, liveness and the figures are about it. Safety is judged over the
   * whole recording, start-up and shutdown included.
   */
  window: { from: number; to: number };
  /** When the recording stopped: every process had exited. */
  end: number;
  /** Replica name → its pod's name. */
  pods: Record<string, string>;
  incarnations: Incarnation[];
  transitions: Transition[];
  pauses: Pause[];
  leaseRows: LeaseRow[];
  writes: AcceptedWrite[];
  rejections: RejectedWrite[];
  labels: LabelChange[];
  /** Every change of an application container's readiness, in time order. */
  appReadiness: AppReadiness[];
  /** Recorded sessions seen ending (session takeover runs; absent or empty otherwise). */
  sessionEnds?: SessionEnd[];
  slots: Slot[];
}
