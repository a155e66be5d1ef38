// The invariants, checked after every event of a schedule (once the microtasks it started have
// run), and the fence guard model the leader work writes through. The first violation ends the
// schedule.
import type { TickReport } from "../../src/election/elector.ts";
import type { EventLoop } from "./event-loop.ts";
import type { LeaseRow } from "./lease-statements.ts";
import type { SimProcess } from "./process.ts";
import type { Statement } from "./server.ts";
import { fmtMs, type Trace } from "./trace.ts";

export const VIOLATION_KINDS = [
  "two-leaders",
  "fence-not-increasing",
  "work-after-deadline",
  "write-without-belief",
  "belief-resurrected",
  "loss-ignored",
  "expiry-backwards",
  "fence-backwards",
  "statement-outlived-timeout",
  "claim-after-exit",
  "claimed-while-unfit",
  "no-leader",
] as const;

export type ViolationKind = (typeof VIOLATION_KINDS)[number];

export interface Violation {
  kind: ViolationKind;
  atUs: number;
  detail: string;
}

export interface CheckerConfig {
  keys: readonly string[];
  callTimeoutMs: number;
  /** Liveness: a leader within this long after the last fault healed. */
  livenessBoundMs: number;
  ignore: readonly ViolationKind[];
}

interface Belief {
  proc: SimProcess;
  key: string;
  was: boolean;
  acquiredNow: boolean;
  /** The term's local deadline as the elector's last tick reported it (its clock, ms). */
  deadline: number | null;
  lostFence: number | null;
}

export class Checker {
  violation: Violation | null = null;
  readonly stats = { leads: 0, writes: 0, refused: 0 };
  readonly #loop: EventLoop;
  readonly #trace: Trace;
  readonly #config: CheckerConfig;
  readonly #beliefs: Belief[] = [];
  readonly #maxFence = new Map<string, number>();
  readonly #guard = new Map<string, number>();
  readonly #rowFence = new Map<string, number>();
  #healUs = Number.POSITIVE_INFINITY;
  readonly #leaderSinceHeal = new Set<string>();

  constructor(loop: EventLoop, trace: Trace, config: CheckerConfig) {
    this.#loop = loop;
    this.#trace = trace;
    this.#config = config;
  }

  fail(kind: ViolationKind, detail: string): void {
    if (this.violation || this.#config.ignore.includes(kind)) return;
    this.violation = { kind, atUs: this.#loop.nowUs, detail };
    this.#trace.add(this.#loop.nowUs, "CHECK", `VIOLATION ${kind}: ${detail}`);
    this.#loop.halt();
  }

  watch(proc: SimProcess): void {
    for (const key of proc.electors.keys()) {
      this.#beliefs.push({ proc, key, was: false, acquiredNow: false, lostFence: null, deadline: null });
    }
  }

  #belief(proc: SimProcess, key: string): Belief | undefined {
    return this.#beliefs.find((b) => b.proc === proc && b.key === key);
  }

  #believes(proc: SimProcess, key: string): boolean {
    return !proc.dead && (proc.electors.get(key)?.isLeader() ?? false);
  }

  ticked(proc: SimProcess, key: string, report: TickReport): void {
    const belief = this.#belief(proc, key);
    if (!belief) return;
    if (report.outcome === "acquired") belief.acquiredNow = true;
    belief.deadline = report.state.role === "leader" ? (report.state.term?.deadline ?? null) : null;
  }

  leadStarted(proc: SimProcess, key: string, fence: number): void {
    this.stats.leads++;
    const max = this.#maxFence.get(key) ?? 0;
    if (fence <= max)
      this.fail("fence-not-increasing", `${proc.name} leads ${key} with fence ${fence}, not above ${max}`);
    this.#maxFence.set(key, Math.max(max, fence));
    if (!this.#believes(proc, key)) {
      this.fail(
        "work-after-deadline",
        `${proc.name} starts work on ${key} (fence ${fence}) while isLeader() is false`,
      );
    }
  }

  /** The guard: highest fence seen per key, lower refused, equal passes. */
  wrote(proc: SimProcess, key: string, fence: number): void {
    const highest = this.#guard.get(key) ?? 0;
    if (fence < highest) {
      this.stats.refused++;
      return;
    }
    this.stats.writes++;
    this.#guard.set(key, fence);
    // A process woken from a freeze runs what fell due before its deadline timer: the README's
    // "wakes up believing until its next check", which only the guard covers. And at the deadline
    // instant itself a work timer due then may run before the deadline timer: the signal aborts
    // "then", while isLeader() is already false.
    const deadline = this.#belief(proc, key)?.deadline ?? null;
    const late = deadline === null ? Number.NaN : proc.clock.now() - deadline;
    // The deadline timer fires on the first microsecond at or after the deadline, or on the next
    // one: its delay is `deadline - now()` in floating point, which the clock rounds up.
    const atDeadline = late >= 0 && late < 0.002;
    if (!this.#believes(proc, key) && !this.#loop.current?.late && !atDeadline) {
      this.fail(
        "write-without-belief",
        `guard accepted fence ${fence} on ${key} from ${proc.name}, which does not believe it leads`,
      );
    }
  }

  /** A claim goes out: never while the process's campaign gate is closed. */
  claimSent(proc: SimProcess, key: string): void {
    if (proc.gateClosed()) {
      this.fail(
        "claimed-while-unfit",
        `${proc.name} sent a claim of ${key} while its campaign gate was closed`,
      );
    }
  }

  lossAnswered(proc: SimProcess, key: string, fence: number): void {
    const belief = this.#belief(proc, key);
    if (belief) belief.lostFence = fence;
  }

  /** Server side: a commit that keeps the term must not shorten it; no commit lowers a key's fence. */
  committed(stmt: Statement, before: ReadonlyMap<string, LeaseRow | null>): void {
    const writes = stmt.execution?.writes;
    if (!writes) return;
    for (const [key, row] of writes) {
      const highest = this.#rowFence.get(key) ?? 0;
      if (row && row.fence < highest) {
        this.fail(
          "fence-backwards",
          `#${stmt.id} ${stmt.request.kind} by ${stmt.from} writes fence ${row.fence} on ${key}, below ${highest} written before`,
        );
      }
      if (row) this.#rowFence.set(key, Math.max(highest, row.fence));
      const old = before.get(key);
      if (!row || !old || stmt.request.kind === "release" || stmt.request.kind === "releaseMany") continue;
      if (row.holder === old.holder && row.fence === old.fence && row.expiresAt < old.expiresAt) {
        this.fail(
          "expiry-backwards",
          `#${stmt.id} ${stmt.request.kind} by ${stmt.from} (started ${fmtMs(this.#loop.nowUs - stmt.startUs)} ago) moves ${key}'s expiry back by ${fmtMs(old.expiresAt - row.expiresAt)} within fence ${row.fence}`,
        );
      }
    }
  }

  finished(stmt: Statement, exitedAtUs: number | null): void {
    if (stmt.from === "operator") return;
    const lived = this.#loop.nowUs - stmt.startUs;
    if (lived > this.#config.callTimeoutMs * 1000 && !stmt.uncancellable) {
      this.fail(
        "statement-outlived-timeout",
        `#${stmt.id} ${stmt.request.kind} from ${stmt.from} ran ${fmtMs(lived)} on the server, past the ${this.#config.callTimeoutMs} ms call timeout`,
      );
    }
    const { request } = stmt;
    const won = request.kind === "claim" && (stmt.execution?.answer as { won?: boolean } | undefined)?.won;
    // An fsync cannot be interrupted: no timeout settles a claim stuck in one.
    if (won && exitedAtUs !== null && stmt.startUs < stmt.clientDeadlineUs && !stmt.uncancellable) {
      this.fail(
        "claim-after-exit",
        `#${stmt.id} claim of ${request.key} by ${stmt.from} committed ${fmtMs(this.#loop.nowUs - exitedAtUs)} after the process exited`,
      );
    }
  }

  /** Liveness is judged from this instant: every fault has healed. */
  healedAt(us: number): void {
    this.#healUs = us;
  }

  /** Every key has had a leader since the heal (or has nobody left to campaign). */
  live(campaigners: (key: string) => number): boolean {
    return this.#config.keys.every((key) => this.#leaderSinceHeal.has(key) || campaigners(key) === 0);
  }

  /** After each event: beliefs now. */
  afterStep(campaigners: (key: string) => number): void {
    const now = this.#loop.nowUs;
    for (const key of this.#config.keys) {
      let leader: Belief | null = null;
      for (const b of this.#beliefs) {
        if (b.key !== key) continue;
        const is = this.#believes(b.proc, key);
        // A stopping elector applies a claim that was in flight without a tick; it releases it next.
        if (is && !b.was && !b.acquiredNow && !b.proc.stopping) {
          this.fail(
            "belief-resurrected",
            `${b.proc.name} believes it leads ${key} again without a new acquisition`,
          );
        }
        if (is && b.lostFence !== null && b.proc.electors.get(key)?.status().fence === b.lostFence) {
          this.fail(
            "loss-ignored",
            `${b.proc.name} still leads ${key} with fence ${b.lostFence} after its renew matched no row`,
          );
        }
        b.was = is;
        b.acquiredNow = false;
        b.lostFence = null;
        if (!is) continue;
        if (leader) {
          const why = [leader, b].find((x) => x.proc.stopping);
          const note = why ? ` (${why.proc.name} is stopping)` : "";
          this.fail(
            "two-leaders",
            `${leader.proc.name} and ${b.proc.name} both believe they lead ${key}${note}`,
          );
        }
        leader = b;
      }
      if (leader && now >= this.#healUs) this.#leaderSinceHeal.add(key);
    }
    if (now >= this.#healUs + this.#config.livenessBoundMs * 1000) {
      for (const key of this.#config.keys) {
        if (!this.#leaderSinceHeal.has(key) && campaigners(key) > 0) {
          this.fail(
            "no-leader",
            `no leader of ${key} within ${this.#config.livenessBoundMs} ms of the last heal`,
          );
        }
      }
    }
  }
}
