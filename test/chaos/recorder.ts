// Collects the chaos run's history as it happens (log lines, pauses, deaths, rejected writes) and,
// at the end, the database's own change logs, then hands the checker one History.
import type pg from "pg";
import type {
  AppReadiness,
  History,
  Incarnation,
  LeaseRow,
  Pause,
  RejectedWrite,
  Slot,
  Transition,
} from "./history.ts";

const LEADING = new Set(["acquired", "renewed"]);

// seq is drawn inside the writing transaction while it holds the row's lock, so it is commit order.
// Times come back as numeric text (microseconds kept): the checker compares a claim's start with
// the previous term's expiry, both from the server's clock.
const READ_LEASE_LOG = `
  SELECT seq, key, holder, fence::text,
         (extract(epoch FROM acquired_at) * 1000)::text AS acquired_ms,
         (extract(epoch FROM expires_at) * 1000)::text AS expires_ms,
         (extract(epoch FROM logged_at) * 1000)::text AS logged_ms, took_gone_session
    FROM chaos_lease_log ORDER BY seq`;
const READ_WRITES = "SELECT seq, replica, fence::text, issued_ms::text FROM chaos_writes ORDER BY seq";

/** A JSON log line, or null for anything else (a line cut short by SIGKILL, say). */
export function jsonLine(text: string): Record<string, unknown> | null {
  if (!text.startsWith("{")) return null;
  try {
    const parsed: unknown = JSON.parse(text);
    return typeof parsed === "object" && parsed !== null ? (parsed as Record<string, unknown>) : null;
  } catch {
    return null;
  }
}

export class Recorder {
  readonly incarnations: Incarnation[] = [];
  readonly transitions: Transition[] = [];
  readonly pauses: Pause[] = [];
  readonly rejections: RejectedWrite[] = [];
  readonly appReadiness: AppReadiness[] = [];
  /** The sidecars' warnings (the start-up checks' among them), each with its replica. */
  readonly warnings: { replica: string; time: number; message: string }[] = [];
  /** Workload errors other than refusals, by message: how often the links failed. */
  readonly writeErrors = new Map<string, number>();
  /** Replica name → its current process's last transition. */
  readonly #lastOutcome = new Map<string, { outcome: string; time: number }>();
  /** Processes past their start-up checks: they said they campaign. */
  readonly #campaigning = new Set<number>();
  /** The lease the faults aim at and the labels show; other leases' lines are kept, not followed. */
  readonly #lease: string | null;

  constructor(lease: string | null = null) {
    this.#lease = lease;
  }

  sidecarStarted(replica: string, pid: number, at: number): void {
    this.incarnations.push({ replica, pid, holder: null, startedAt: at, endedAt: null });
    this.#lastOutcome.delete(replica);
  }

  sidecarEnded(pid: number, at: number): void {
    const incarnation = this.#incarnation(pid);
    if (incarnation && incarnation.endedAt === null) incarnation.endedAt = at;
    if (incarnation) this.#lastOutcome.delete(incarnation.replica);
  }

  sidecarLine(pid: number, line: Record<string, unknown>): void {
    const incarnation = this.#incarnation(pid);
    if (!incarnation) return;
    // The process's own identity: `holder` on every line (a transition's `heldBy` is who holds
    // after it). The latest wins: once the lease stack opens it appends the restart proof, and
    // the table knows the holder only by that name.
    const self = line.holder;
    const settled = incarnation.holder?.includes("#r:") === true;
    if (typeof self === "string" && (!settled || self.includes("#r:"))) incarnation.holder = self;
    const time = typeof line.time === "string" ? Date.parse(line.time) : Number.NaN;
    if (line.chaos === "loop-block") {
      this.pauses.push({
        pid,
        kind: "loop-block",
        from: Number(line.blockedFrom),
        to: Number(line.blockedTo),
      });
      return;
    }
    if (typeof line.msg === "string" && line.msg.startsWith("campaigning for ")) this.#campaigning.add(pid);
    if (line.level === "warn" && typeof line.msg === "string") {
      this.warnings.push({ replica: incarnation.replica, time, message: line.msg });
    }
    if (typeof line.outcome !== "string" || Number.isNaN(time)) return;
    const fence = typeof line.fence === "number" ? line.fence : null;
    const key = typeof line.lease === "string" ? line.lease : undefined;
    this.transitions.push({ pid, time, outcome: line.outcome, fence, ...(key ? { key } : {}) });
    if (this.#lease === null || key === undefined || key === this.#lease) {
      this.#lastOutcome.set(incarnation.replica, { outcome: line.outcome, time });
    }
  }

  pauseStarted(pid: number, kind: Pause["kind"], at: number): Pause {
    const pause: Pause = { pid, kind, from: at, to: null };
    this.pauses.push(pause);
    return pause;
  }

  workloadLine(line: Record<string, unknown>): void {
    if (line.event === "rejected") {
      this.rejections.push({
        replica: String(line.replica),
        fence: Number(line.fence),
        currentFence: typeof line.currentFence === "number" ? line.currentFence : null,
        time: Number(line.time),
      });
    } else if (line.event === "write-error") {
      const message = String(line.err);
      this.writeErrors.set(message, (this.writeErrors.get(message) ?? 0) + 1);
    }
  }

  appReadinessChanged(pod: string, ready: boolean, at: number): void {
    this.appReadiness.push({ pod, time: at, ready });
  }

  /** Whether the replica's latest process got past its start-up checks (what it warns of is logged by then). */
  campaigning(replica: string): boolean {
    const latest = this.incarnations.findLast((i) => i.replica === replica);
    return latest !== undefined && latest.endedAt === null && this.#campaigning.has(latest.pid);
  }

  /** The replica whose live process said it leads most recently (a woken old leader may still say so). */
  believedLeader(): string | null {
    let leader: { replica: string; time: number } | null = null;
    for (const [replica, { outcome, time }] of this.#lastOutcome) {
      if (LEADING.has(outcome) && (leader === null || time > leader.time)) leader = { replica, time };
    }
    return leader?.replica ?? null;
  }

  async readDatabase(pool: pg.Pool): Promise<{ leaseRows: LeaseRow[]; writes: History["writes"] }> {
    const lease = await pool.query<{
      seq: string;
      key: string;
      holder: string;
      fence: string;
      acquired_ms: string;
      expires_ms: string;
      logged_ms: string;
      took_gone_session: boolean | null;
    }>(READ_LEASE_LOG);
    const writes = await pool.query<{ seq: string; replica: string; fence: string; issued_ms: string }>(
      READ_WRITES,
    );
    return {
      leaseRows: lease.rows.map((r) => ({
        seq: Number(r.seq),
        key: r.key,
        holder: r.holder,
        fence: Number(r.fence),
        acquiredAt: Number(r.acquired_ms),
        expiresAt: Number(r.expires_ms),
        loggedAt: Number(r.logged_ms),
        ...(r.took_gone_session ? { tookGoneSession: true } : {}),
      })),
      writes: writes.rows.map((w) => ({
        seq: Number(w.seq),
        replica: w.replica,
        fence: Number(w.fence),
        issuedAt: Number(w.issued_ms),
      })),
    };
  }

  #incarnation(pid: number): Incarnation | undefined {
    for (let i = this.incarnations.length - 1; i >= 0; i--) {
      if (this.incarnations[i]?.pid === pid) return this.incarnations[i];
    }
    return undefined;
  }
}

export function buildHistory(
  recorder: Recorder,
  parts: Pick<
    History,
    | "lease"
    | "extraLeases"
    | "leaseMs"
    | "window"
    | "end"
    | "pods"
    | "leaseRows"
    | "writes"
    | "labels"
    | "sessionEnds"
  > & {
    slots: Slot[];
  },
): History {
  return {
    ...parts,
    incarnations: recorder.incarnations,
    transitions: recorder.transitions,
    pauses: recorder.pauses,
    rejections: recorder.rejections,
    appReadiness: recorder.appReadiness,
  };
}
