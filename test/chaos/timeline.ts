// Who believed it led, when, and whether it could act: belief intervals from each process's own
// log lines, minus the windows in which it was paused; and each pod's role label over time.
import type { History, Incarnation, LabelChange } from "./history.ts";

/** Half-open [from, to). */
export interface Interval {
  from: number;
  to: number;
}

const OPENS = new Set(["acquired", "renewed"]);
// Any follower outcome also proves the belief had ended by then; a health handover ("resigned")
// ends the term at its log line, before the release goes out.
const CLOSES = new Set(["stepped-down", "lost", "released", "held-by-other", "resigned", "not-campaigning"]);

export function subtract(intervals: readonly Interval[], holes: readonly Interval[]): Interval[] {
  let out = [...intervals];
  for (const hole of holes) {
    out = out.flatMap((i) => {
      if (hole.to <= i.from || hole.from >= i.to) return [i];
      const parts: Interval[] = [];
      if (hole.from > i.from) parts.push({ from: i.from, to: hole.from });
      if (hole.to < i.to) parts.push({ from: hole.to, to: i.to });
      return parts;
    });
  }
  return out;
}

/** When the process believed it led, from "acquired" to the line that ends it, or its death. */
export function believedIntervals(history: History, incarnation: Incarnation): Interval[] {
  const end = incarnation.endedAt ?? history.end;
  const lines = history.transitions
    .filter((t) => t.pid === incarnation.pid && t.time <= end)
    .sort((a, b) => a.time - b.time);
  const out: Interval[] = [];
  let open: number | null = null;
  for (const line of lines) {
    if (open === null && OPENS.has(line.outcome)) open = line.time;
    else if (open !== null && CLOSES.has(line.outcome)) {
      out.push({ from: open, to: line.time });
      open = null;
    }
  }
  if (open !== null && open < end) out.push({ from: open, to: end });
  return out;
}

/**
 * Windows in which the process cannot act: each pause, plus `wakeGraceMs` after it for the first
 * turn of its event loop, where timers that fell due during the pause (the local deadline among
 * them) run. A pause with no end lasts until the process's end.
 */
export function pausedWindows(history: History, incarnation: Incarnation, wakeGraceMs: number): Interval[] {
  const end = incarnation.endedAt ?? history.end;
  return history.pauses
    .filter((p) => p.pid === incarnation.pid)
    .map((p) => ({ from: p.from, to: p.to === null ? end : p.to + wakeGraceMs }));
}

export interface Belief {
  incarnation: Incarnation;
  /** Everything the log lines say. */
  believed: Interval[];
  /** Minus the paused windows: when it believed and could act on it. */
  running: Interval[];
  /**
   * When a store call of its failed or got no answer while it believed (a leader calls only to
   * renew, or to release at its end): it then keeps believing until its local deadline, learning
   * nothing meanwhile. The elector logs an outcome when it changes, so after a good renew the
   * first failed one is always here.
   */
  renewErrors: number[];
}

export function beliefs(history: History, wakeGraceMs: number): Belief[] {
  return history.incarnations.map((incarnation) => {
    const believed = believedIntervals(history, incarnation);
    return {
      incarnation,
      believed,
      running: subtract(believed, pausedWindows(history, incarnation, wakeGraceMs)),
      renewErrors: history.transitions
        .filter((t) => t.pid === incarnation.pid && t.outcome === "transient-error")
        .filter((t) => believed.some((i) => i.from <= t.time && t.time <= i.to))
        .map((t) => t.time),
    };
  });
}

export class LabelTimeline {
  readonly #byPod = new Map<string, LabelChange[]>();

  constructor(changes: readonly LabelChange[]) {
    const ordered = [...changes].sort((a, b) => a.resourceVersion - b.resourceVersion);
    for (const change of ordered) {
      const list = this.#byPod.get(change.pod) ?? [];
      list.push(change);
      this.#byPod.set(change.pod, list);
    }
  }

  /** The pod's role label at `time` (the last change seen at or before it). */
  roleAt(pod: string, time: number): string | null {
    let role: string | null = null;
    for (const change of this.#byPod.get(pod) ?? []) {
      if (change.time > time) break;
      role = change.role;
    }
    return role;
  }

  times(): number[] {
    return [...this.#byPod.values()].flat().map((c) => c.time);
  }
}

const contains = (intervals: readonly Interval[], t: number) =>
  intervals.some((i) => i.from <= t && t < i.to);

/** "A leader exists and is labelled": a process that believes, can act, and whose pod shows it. */
export class LeadershipView {
  readonly #beliefs: readonly Belief[];
  readonly #labels: LabelTimeline;
  readonly #pods: Record<string, string>;
  /** Every instant at which the answer can change, sorted. */
  readonly #breakpoints: number[];

  constructor(history: History, beliefList: readonly Belief[]) {
    this.#beliefs = beliefList;
    this.#labels = new LabelTimeline(history.labels);
    this.#pods = history.pods;
    const points = new Set<number>(this.#labels.times());
    for (const b of beliefList) for (const i of b.running) points.add(i.from).add(i.to);
    this.#breakpoints = [...points].sort((a, b) => a - b);
  }

  leaderAt(t: number): string | null {
    for (const b of this.#beliefs) {
      const pod = this.#pods[b.incarnation.replica];
      if (pod && contains(b.running, t) && this.#labels.roleAt(pod, t) === "leader") {
        return b.incarnation.replica;
      }
    }
    return null;
  }

  /** The first instant in [from, until] at which `wanted(leaderAt(t))` holds, or null. */
  firstWhen(from: number, until: number, wanted: (leader: string | null) => boolean): number | null {
    if (wanted(this.leaderAt(from))) return from;
    const points = this.#breakpoints;
    let low = 0;
    let high = points.length;
    while (low < high) {
      const mid = (low + high) >>> 1;
      if ((points[mid] as number) <= from) low = mid + 1;
      else high = mid;
    }
    for (let i = low; i < points.length && (points[i] as number) <= until; i++) {
      const t = points[i] as number;
      if (wanted(this.leaderAt(t))) return t;
    }
    return null;
  }
}
