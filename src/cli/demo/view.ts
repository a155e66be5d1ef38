// The live terminal view: every replica (from its own /status endpoint and log), the lease as
// the server sees it, the failovers measured so far, and the latest events. Redrawn in place a
// few times a second on the alternate screen, which is given back on stop.
import type { StatusDocument } from "../../sidecar/http-server.ts";
import type { FailoverTimer, LeaseRow } from "./failover-timer.ts";
import type { Replica, ReplicaGroup } from "./replicas.ts";
import { type RoundResult, SIGNAL_OF, type StopKind } from "./rounds.ts";
import { roundLine, statsByKind, statsLine } from "./summary.ts";

const REFRESH_MS = 250;
const HISTORY_SHOWN = 6;
const EVENTS_SHOWN = 6;
const STATUS_TIMEOUT_MS = 400;

const BOLD = "\x1b[1m";
const GREEN = "\x1b[32m";
const RESET = "\x1b[0m";

export interface ReplicaRow {
  name: string;
  pid: number;
  role: "leader" | "follower" | "starting" | "stopped";
  fence: number | null;
  remainingMs: number | null;
  lastTransition: string | null;
  lastTransitionAgeMs: number | null;
}

export interface Frame {
  header: readonly string[];
  rows: ReplicaRow[];
  lease: LeaseRow | null;
  leaderName: string | null;
  next: { inMs: number; kind: StopKind } | null;
  history: readonly RoundResult[];
  events: readonly string[];
}

function seconds(ms: number): string {
  return `${(Math.max(0, ms) / 1000).toFixed(1)}s`;
}

/** Cuts plain text to the terminal's width, so no line wraps and the redraw stays in place. */
function clip(text: string, width: number): string {
  return text.length <= width ? text : `${text.slice(0, Math.max(0, width - 1))}…`;
}

export function renderFrame(f: Frame, width: number): string[] {
  const table = f.rows.map((r) => {
    const fixed = [
      r.name.padEnd(11),
      String(r.pid).padEnd(8),
      r.role.padEnd(9),
      (r.fence === null ? "-" : String(r.fence)).padEnd(6),
      (r.remainingMs === null ? "-" : seconds(r.remainingMs)).padEnd(10),
      "",
    ].join(" ");
    const transition =
      r.lastTransition === null ? "-" : `(${seconds(r.lastTransitionAgeMs ?? 0)} ago) ${r.lastTransition}`;
    const line = clip(fixed + transition, width);
    return r.role === "leader" ? `${GREEN}${BOLD}${line}${RESET}` : line;
  });
  const leader =
    f.lease && f.lease.ttlMs > 0
      ? `${f.leaderName ?? f.lease.holder} with fence ${f.lease.fence}, ${seconds(f.lease.ttlMs)} left on the server's clock`
      : "none (the lease is free or expired)";
  const next = f.next
    ? `next: ${SIGNAL_OF[f.next.kind]} to the leader in ${seconds(f.next.inMs)}`
    : "next: stopping the leader / waiting for the new one";
  const stats = statsByKind(f.history);
  const plain = (lines: readonly string[]) => lines.map((line) => clip(line, width));
  const bold = (line: string) => `${BOLD}${clip(line, width)}${RESET}`;
  return [
    ...plain(f.header),
    "",
    bold("REPLICA     PID      ROLE      FENCE  REMAINING  LAST TRANSITION"),
    ...table,
    "",
    bold(`leader: ${leader}`),
    ...plain([next, ""]),
    bold("failovers (measured on the server's clock, stop → new term)"),
    ...plain([
      ...(f.history.length === 0
        ? ["  none yet"]
        : f.history
            .slice(-HISTORY_SHOWN)
            .reverse()
            .map((r) => `  ${roundLine(r)}`)),
      `  ${statsLine("graceful", stats.graceful)}`,
      `  ${statsLine("kill", stats.kill)}`,
      "",
    ]),
    bold("events"),
    ...plain(f.events.slice(-EVENTS_SHOWN).map((e) => `  ${e}`)),
  ];
}

async function fetchStatus(replica: Replica): Promise<StatusDocument | null> {
  if (replica.httpPort === null) return null;
  try {
    const res = await fetch(`http://127.0.0.1:${replica.httpPort}/status`, {
      signal: AbortSignal.timeout(STATUS_TIMEOUT_MS),
    });
    return res.ok ? ((await res.json()) as StatusDocument) : null;
  } catch {
    return null;
  }
}

export interface LiveViewSources {
  header: readonly string[];
  group: ReplicaGroup;
  timer: FailoverTimer;
  history: () => readonly RoundResult[];
  next: () => { at: number; kind: StopKind } | null;
}

export class LiveView {
  readonly #sources: LiveViewSources;
  readonly #out: NodeJS.WriteStream;
  readonly #events: string[] = [];
  #interval: NodeJS.Timeout | null = null;
  #drawing = false;
  readonly #restore = () => this.#out.write("\x1b[?25h\x1b[?1049l");

  constructor(sources: LiveViewSources, out: NodeJS.WriteStream = process.stdout) {
    this.#sources = sources;
    this.#out = out;
  }

  start(): void {
    this.#out.write("\x1b[?1049h\x1b[?25l");
    // Give the terminal back even if the process ends some unplanned way.
    process.once("exit", this.#restore);
    this.#interval = setInterval(() => void this.#draw(), REFRESH_MS);
    void this.#draw();
  }

  note(text: string): void {
    this.#events.push(text);
    if (this.#events.length > EVENTS_SHOWN) this.#events.shift();
  }

  stop(): void {
    if (this.#interval === null) return;
    clearInterval(this.#interval);
    this.#interval = null;
    process.off("exit", this.#restore);
    this.#restore();
  }

  async #draw(): Promise<void> {
    if (this.#drawing) return;
    this.#drawing = true;
    try {
      const frame = await this.#frame();
      if (this.#interval === null) return;
      const lines = renderFrame(frame, this.#out.columns || 100).map((line) => `${line}\x1b[K`);
      this.#out.write(`\x1b[H${lines.join("\n")}\n\x1b[J`);
    } catch {
      // A frame that could not be drawn is skipped; the next one comes a moment later.
    } finally {
      this.#drawing = false;
    }
  }

  async #frame(): Promise<Frame> {
    const s = this.#sources;
    const replicas = [...s.group.replicas];
    const [lease, ...statuses] = await Promise.all([
      s.timer.read().catch(() => null),
      ...replicas.map(fetchStatus),
    ]);
    const now = performance.now();
    const rows = replicas.map((replica, i): ReplicaRow => {
      const status = statuses[i]?.leases[0];
      const alive = replica.child.exitCode === null && replica.child.signalCode === null;
      const holds = lease !== null && lease.ttlMs > 0 && lease.holder === replica.holder;
      return {
        name: replica.name,
        pid: replica.pid,
        role: !alive || replica.stopSignal ? "stopped" : (status?.role ?? "starting"),
        fence: status?.role === "leader" ? status.fence : null,
        remainingMs: holds && lease ? lease.ttlMs : null,
        lastTransition: replica.lastTransition?.message ?? null,
        lastTransitionAgeMs: replica.lastTransition ? now - replica.lastTransition.at : null,
      };
    });
    const next = s.next();
    return {
      header: s.header,
      rows,
      lease,
      leaderName: lease ? (s.group.byHolder(lease.holder)?.name ?? null) : null,
      next: next ? { inMs: next.at - now, kind: next.kind } : null,
      history: s.history(),
      events: this.#events,
    };
  }
}
