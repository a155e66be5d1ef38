// The safety checker: a pure function from a recorded chaos history to its violations and the
// failover figures. It trusts nothing but the history: log lines, the database's own change logs
// (lease rows and accepted writes, both in commit order) and the API server's label changes.
// Safety is judged over the whole recording, start-up and shutdown included; liveness and the
// figures over the fault phase.
import { unreadyLeaders } from "./health-rules.ts";
import type { History, Incarnation, Pause } from "./history.ts";
import { fenceViolations, replicaOfHolder, termOverlaps } from "./lease-rules.ts";
import { type FaultKind, healthGraceOf } from "./schedule.ts";
import { type Belief, beliefs, type Interval, LeadershipView } from "./timeline.ts";
import type { Violation } from "./violation.ts";
import { QUIET_BOUND_MS } from "./workload-timing.ts";
import { quietWorkloads, staleWrites, writesNotGranted } from "./write-rules.ts";

export type { Rule, Violation } from "./violation.ts";

export interface SlotOutcome {
  index: number;
  kind: FaultKind;
  /** From the first instant without a labelled, running leader during the fault to the next one with. */
  failoverMs: number | null;
  /** From the heal to the first instant with a labelled, running leader (0: there was one). */
  recoveryMs: number | null;
}

export interface CheckResult {
  violations: Violation[];
  slots: SlotOutcome[];
  writesAccepted: number;
  writesRejected: number;
  /** Per pause kind: believing leaders woken while another led, and the longest stale belief. */
  staleWakeups: Record<Pause["kind"], { count: number; maxMs: number }>;
  /** The longest a leader with a healthy database link went without an accepted write. */
  longestWriteGapMs: number;
  /** The bounds this result was judged with. */
  bounds: Required<CheckOptions>;
}

export interface CheckOptions {
  /** Log times are whole milliseconds taken just after the change: overlaps up to this are rounding. */
  toleranceMs?: number;
  /** After a pause, the first turn of the event loop (where the local deadline fires) may take this long. */
  wakeGraceMs?: number;
  /** A leader must be labelled within this long after a heal; default lease duration + 1 s. */
  livenessBoundMs?: number;
  /** A leader with a healthy database link must get a write accepted at least this often. */
  quietBoundMs?: number;
  /**
   * How long a holder whose term the server ended behind its back (row DELETE, DROP TABLE, a
   * forward clock step past the margin) may go on believing: its next renew is sent within a renew
   * interval and answered within the statement timeout. Default half the lease (lease/3 + lease/6).
   */
  serverEndGraceMs?: number;
  /**
   * The sidecars' safety margin: a holder believes at most until its local deadline, its last
   * good claim or renew's send + the ttl it was answered with − this margin, which is at most
   * that statement's expiry − this margin (the ttl is the expiry − the server's clock, read after
   * the send). Default the renew interval, a third of the lease (666 ms at 2 s).
   */
  safetyMarginMs?: number;
  /**
   * Session takeover: how long a holder whose recorded session ended while it lived may go on
   * believing after that end: the README's window, one renew interval plus the call timeout
   * (its local deadline after its last good renew, which was sent before the end). Default
   * lease/3 + lease/6, the chaos sidecars' renew interval and call timeout (999 ms at 2 s).
   */
  sessionEndGraceMs?: number;
  /**
   * How long a pod may stay labelled leader with its application unready while another pod's is
   * ready: the health gate's grace period, then a handover (peer list, demotion) or, when the
   * leader cannot act, a takeover after its lease; default grace + lease + 1 s.
   */
  unreadyLeaderBoundMs?: number;
  /** The sidecars ran with --crash-takeover: a term of a holder whose process had ended may be taken. */
  crashTakeover?: boolean;
}

export const DEFAULT_TOLERANCE_MS = 2;
/**
 * A process woken from SIGSTOP steps down within a few ms. One whose loop was busy-blocked took
 * 5–100 ms in the chaos runs on a loaded 2-core VM (1–4 ms alone): the kernel runs the others
 * first after it burnt a core for seconds. 200 ms stays below the replicas' statement timeout
 * (333 ms with the 2 s lease), so an elector that waited for its next store call to time out
 * before stepping down would still be caught.
 */
export const DEFAULT_WAKE_GRACE_MS = 200;

/**
 * A window in which the server ended a live term without telling its holder, and how long after
 * it the holder may still believe. `holder`: only that holder's belief is excused (a recorded
 * session that ended); without it, whoever held then (a row removed, the clock stepped).
 */
export interface ServerEnd extends Interval {
  graceMs: number;
  /**
   * A row removed or the clock stepped: the holder's belief is also bounded by its own local
   * deadline, and a holder that logged a renew left unanswered since the window began may
   * believe until that deadline; past the window's end + this when the deadline is not known.
   */
  unansweredGraceMs?: number;
  holder?: string;
  /** The one lease whose term it ended (a row DELETE); without it, every lease's (DROP TABLE, a clock step). */
  key?: string;
}

/** Renew interval plus call timeout at pglease's defaults: a third of the lease, half of that. */
const sessionWindowOf = (leaseMs: number) => Math.floor(leaseMs / 3) + Math.floor(leaseMs / 3 / 2);

function serverEnds(
  history: History,
  graceMs: number,
  unansweredGraceMs: number,
  sessionGraceMs: number,
): ServerEnd[] {
  const faults = history.slots.flatMap((s) => s.faults);
  // A row-delete removes the primary lease's row alone (db-faults.ts); a table drop or a clock
  // step ends every lease's term.
  const byFault = faults.flatMap((f) =>
    (f.serverEnded ?? []).map((w) => (f.kind === "row-delete" ? { ...w, key: history.lease } : w)),
  );
  // A stalled session (leader-session-stall) ends only after its holder gave it up: not the
  // server's doing, so not the README's window, and its end excuses no believer.
  const stalled = new Set(faults.flatMap((f) => f.sessionStalled ?? []).map((t) => `${t.holder} ${t.fence}`));
  const sessionEnds = (history.sessionEnds ?? []).filter((e) => !stalled.has(`${e.holder} ${e.fence}`));
  return [
    ...byFault.map((w) => ({ ...w, graceMs, unansweredGraceMs })),
    ...sessionEnds.map((e) => ({
      from: e.from,
      to: e.to,
      graceMs: sessionGraceMs,
      holder: e.holder,
    })),
  ];
}

/**
 * The latest instant the process's local deadline could fall, for the term it believed in at
 * `at`, as its deadline timer logs it; null when the history cannot bound it.
 */
export type DeadlineOf = (who: Incarnation, at: number, window: Interval) => number | null;

/**
 * From the lease-row log: the holder's term's latest expiry − the safety margin, + the wake-up
 * grace for the deadline timer's turn of the loop (step-downs were logged up to 103 ms after it
 * at load 15–33). Unknown when a clock step may have stamped that row: the server's clock stepped
 * back stamps an expiry earlier than the one the holder was answered with.
 */
export function localDeadlines(history: History, safetyMarginMs: number, wakeGraceMs: number): DeadlineOf {
  const steps = history.slots.flatMap((s) => s.faults).filter((f) => f.kind === "clock-step");
  return (who, at, window) => {
    const term = history.transitions
      .filter(
        (t) => t.pid === who.pid && t.time <= at && (t.outcome === "acquired" || t.outcome === "renewed"),
      )
      .at(-1)?.fence;
    // Claims and renews: a release or a removal writes an expiry no later than its own stamp.
    const written = history.leaseRows.filter(
      (r) => r.holder === who.holder && r.fence === term && r.expiresAt > r.loggedAt,
    );
    if (written.length === 0) return null;
    const last = written.reduce((x, y) => (y.expiresAt > x.expiresAt ? y : x));
    if (steps.some((f) => f.healedAt >= last.loggedAt && f.startedAt <= window.to)) return null;
    return last.expiresAt - safetyMarginMs + wakeGraceMs;
  };
}

/**
 * No two processes that could act believed they led at the same instant; except a holder whose
 * term the server ended behind its back (`serverEnded`), until the window's grace after that, or
 * until its local deadline when a renew of the holder's got no answer after the window began;
 * never past that deadline.
 */
export function overlappingBeliefs(
  list: readonly Belief[],
  toleranceMs: number,
  serverEnded: readonly ServerEnd[] = [],
  deadlineOf: DeadlineOf = () => null,
): Violation[] {
  const intervals = list
    .flatMap((b) => b.running.map((i) => ({ ...i, who: b.incarnation, renewErrors: b.renewErrors })))
    .sort((a, b) => a.from - b.from);
  const out: Violation[] = [];
  for (let i = 0; i < intervals.length; i++) {
    const a = intervals[i];
    if (!a) continue;
    for (let j = i + 1; j < intervals.length; j++) {
      const b = intervals[j];
      if (!b || b.from >= a.to) break;
      const overlap = Math.min(a.to, b.to) - b.from;
      if (a.who.pid === b.who.pid || overlap <= toleranceMs) continue;
      const excused = (w: ServerEnd) => {
        if (w.holder !== undefined && w.holder !== a.who.holder) return false;
        if (!(a.from < w.to && b.from >= w.from)) return false;
        if (w.unansweredGraceMs === undefined) return a.to <= w.to + w.graceMs;
        const deadline = deadlineOf(a.who, a.from, w);
        if (deadline !== null && a.to > deadline) return false;
        const unanswered =
          a.renewErrors.some((t) => t >= w.from && t <= a.to) &&
          a.to <= (deadline ?? w.to + w.unansweredGraceMs);
        return a.to <= w.to + w.graceMs || unanswered;
      };
      if (serverEnded.some(excused)) continue;
      out.push({
        rule: "two-believers",
        at: b.from,
        detail: `${a.who.replica} (pid ${a.who.pid}) and ${b.who.replica} (pid ${b.who.pid}) both believed they led for ${overlap} ms while running`,
      });
    }
  }
  return out;
}

/**
 * At every state the API server went through, at most one pod carried the leader label; except
 * while a holder whose recorded session ended may still believe (and so label). A row removed,
 * a table dropped or a clock stepped excuse nothing here: the new leader fences the other pods
 * off (superseded-by) before it labels itself, and the old holder's label patch is then refused.
 */
export function overlappingLabels(history: History, serverEnded: readonly ServerEnd[] = []): Violation[] {
  const replicaOf = replicaOfHolder(history);
  const podOf = (holder: string) => history.pods[replicaOf(holder) ?? ""];
  const excused = (from: number, to: number, pods: Set<string>) =>
    serverEnded.some(
      (w) =>
        (w.holder === undefined || pods.has(podOf(w.holder) ?? "")) &&
        from >= w.from &&
        to <= w.to + w.graceMs,
    );
  const out: Violation[] = [];
  const roles = new Map<string, string | null>();
  let published = false;
  let open: { at: number; pods: Set<string> } | null = null;
  for (const change of [...history.labels].sort((a, b) => a.resourceVersion - b.resourceVersion)) {
    roles.set(change.pod, change.role);
    published ||= change.role === "leader";
    const leaders = [...roles].filter(([, role]) => role === "leader").map(([pod]) => pod);
    if (published && leaders.length > 1) {
      open ??= { at: change.time, pods: new Set() };
      for (const pod of leaders) open.pods.add(pod);
    } else if (open) {
      if (excused(open.at, change.time, open.pods)) {
        open = null;
        continue;
      }
      out.push({
        rule: "two-labelled",
        at: open.at,
        detail: `pods ${[...open.pods].join(", ")} carried the leader label together for ${change.time - open.at} ms`,
      });
      open = null;
    }
  }
  if (open) {
    out.push({
      rule: "two-labelled",
      at: open.at,
      detail: `pods ${[...open.pods].join(", ")} still both labelled leader`,
    });
  }
  return out;
}

/** Pauses that ended while the process still believed and someone else led: how long until it stepped down. */
function staleWakeups(history: History, list: readonly Belief[]): CheckResult["staleWakeups"] {
  const out: CheckResult["staleWakeups"] = {
    sigstop: { count: 0, maxMs: 0 },
    "loop-block": { count: 0, maxMs: 0 },
  };
  for (const pause of history.pauses) {
    const end = pause.to;
    const mine = list.find((b) => b.incarnation.pid === pause.pid);
    const stale = end === null ? undefined : mine?.believed.find((i) => i.from <= end && end < i.to);
    if (end === null || !stale) continue;
    const othersLed = list.some((b) => b !== mine && b.running.some((i) => i.from < stale.to && end < i.to));
    if (!othersLed) continue;
    const kind = out[pause.kind];
    kind.count++;
    kind.maxMs = Math.max(kind.maxMs, stale.to - end);
  }
  return out;
}

/** The history of one lease: its rows and its transitions (lines without a lease are the primary's). */
export function onlyLease(history: History, key: string): History {
  return {
    ...history,
    lease: key,
    transitions: history.transitions.filter((t) => (t.key ?? history.lease) === key),
    leaseRows: history.leaseRows.filter((r) => r.key === key),
  };
}

/**
 * The rules a lease nobody writes under nor labels must keep, judged like the primary's: fences
 * rise, no term starts before the previous one ran out, no two running processes believe at once.
 */
function extraLeaseViolations(
  history: History,
  key: string,
  toleranceMs: number,
  wakeGraceMs: number,
  ended: readonly ServerEnd[],
  crashTakeover: boolean,
  safetyMarginMs: number,
): Violation[] {
  const one = onlyLease(history, key);
  return [
    ...fenceViolations(one),
    ...termOverlaps(one, crashTakeover),
    ...overlappingBeliefs(
      beliefs(one, wakeGraceMs),
      toleranceMs,
      ended.filter((w) => w.key === undefined || w.key === key),
      localDeadlines(one, safetyMarginMs, wakeGraceMs),
    ),
  ].map((v) => ({ ...v, detail: `lease ${key}: ${v.detail}` }));
}

export function checkHistory(recorded: History, options: CheckOptions = {}): CheckResult {
  // Workload, labels, liveness and the figures are the primary lease's; the extra leases are
  // judged on their own below.
  const history = onlyLease(recorded, recorded.lease);
  const toleranceMs = options.toleranceMs ?? DEFAULT_TOLERANCE_MS;
  const wakeGraceMs = options.wakeGraceMs ?? DEFAULT_WAKE_GRACE_MS;
  const bound = options.livenessBoundMs ?? history.leaseMs + 1_000;
  const quietBoundMs = options.quietBoundMs ?? QUIET_BOUND_MS;
  const serverEndGraceMs = options.serverEndGraceMs ?? Math.round(history.leaseMs / 2);
  const sessionEndGraceMs = options.sessionEndGraceMs ?? sessionWindowOf(history.leaseMs);
  const safetyMarginMs = options.safetyMarginMs ?? Math.floor(history.leaseMs / 3);
  const ended = serverEnds(history, serverEndGraceMs, history.leaseMs - safetyMarginMs, sessionEndGraceMs);
  const unreadyLeaderBoundMs =
    options.unreadyLeaderBoundMs ?? healthGraceOf(history.leaseMs) + history.leaseMs + 1_000;
  const list = beliefs(history, wakeGraceMs);
  const view = new LeadershipView(history, list);
  const quiet = quietWorkloads(history, list, quietBoundMs);
  const violations: Violation[] = [
    ...staleWrites(history),
    ...writesNotGranted(history),
    ...quiet.violations,
    ...fenceViolations(history),
    ...termOverlaps(history, options.crashTakeover ?? false),
    ...overlappingBeliefs(list, toleranceMs, ended, localDeadlines(history, safetyMarginMs, wakeGraceMs)),
    ...overlappingLabels(
      history,
      ended.filter((w) => w.holder !== undefined),
    ),
    ...unreadyLeaders(history, unreadyLeaderBoundMs),
    ...(recorded.extraLeases ?? []).flatMap((key) =>
      extraLeaseViolations(
        recorded,
        key,
        toleranceMs,
        wakeGraceMs,
        ended,
        options.crashTakeover ?? false,
        safetyMarginMs,
      ),
    ),
  ];
  const slots = [...history.slots].sort((a, b) => a.startedAt - b.startedAt);
  const outcomes = slots.map((slot, i): SlotOutcome => {
    const nextStart = slots[i + 1]?.startedAt ?? history.window.to;
    const back = view.firstWhen(slot.healedAt, nextStart, (leader) => leader !== null);
    const recoveryMs = back === null ? null : back - slot.healedAt;
    if (recoveryMs === null || recoveryMs > bound) {
      violations.push({
        rule: "liveness",
        at: slot.healedAt,
        detail: `slot ${slot.index} (${slot.kind}): ${recoveryMs === null ? "no" : `a leader only ${recoveryMs} ms after the heal; no`} labelled, running leader within ${bound} ms`,
      });
    }
    const gone = view.firstWhen(slot.startedAt, slot.healedAt, (leader) => leader === null);
    const regained = gone === null ? null : view.firstWhen(gone, nextStart, (leader) => leader !== null);
    return {
      index: slot.index,
      kind: slot.kind,
      failoverMs: gone === null || regained === null ? null : regained - gone,
      recoveryMs,
    };
  });
  const inWindow = (t: number) => t >= history.window.from && t <= history.window.to;
  return {
    violations: violations.sort((a, b) => a.at - b.at),
    slots: outcomes,
    writesAccepted: history.writes.filter((w) => inWindow(w.issuedAt)).length,
    writesRejected: history.rejections.filter((r) => inWindow(r.time)).length,
    staleWakeups: staleWakeups(history, list),
    longestWriteGapMs: quiet.longestGapMs,
    bounds: {
      toleranceMs,
      wakeGraceMs,
      livenessBoundMs: bound,
      quietBoundMs,
      serverEndGraceMs,
      safetyMarginMs,
      sessionEndGraceMs,
      unreadyLeaderBoundMs,
      crashTakeover: options.crashTakeover ?? false,
    },
  };
}
