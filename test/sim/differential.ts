// The model's side of model-vs-postgres.test.ts: runs one lease statement of
// lease-statements.ts against a mirrored row and says whether a real answer (and the real row
// after it) is one the model could have given, for a statement clock known only within bounds.
import type { CandidateRow, LeaseRow, Semantics, StatementContext } from "./lease-statements.ts";
import type { Rng } from "./prng.ts";
import { execute, keysOf, type Request } from "./requests.ts";

/** A real row as the test reads it back: times in µs since the epoch, exact. */
export type RealRow = Omit<LeaseRow, "tuple" | "key"> | null;

export interface Verdict {
  ok: boolean;
  /** Why not, naming what differed; or the clock the statement had, when it matched. */
  detail: string;
  /** The rows after the statement, as the model wrote them (when it matched). */
  rows: Map<string, LeaseRow>;
}

/**
 * Candidate clocks for a statement that ran between server times `before` and `after` (µs): both
 * ends, and the one the written row (exact) or the answer's expiresAt (to the ms) gives away.
 */
export function candidateClocks(
  request: Request,
  before: number,
  after: number,
  realRows: Iterable<RealRow>,
  answer: unknown,
): number[] {
  const clocks = [before, after];
  for (const real of realRows) {
    if (real && "durationMs" in request) clocks.push(real.expiresAt - request.durationMs * 1000);
    if (real && (request.kind === "release" || request.kind === "releaseMany")) clocks.push(real.expiresAt);
    if (real?.reservedUntil !== undefined && request.kind === "reserve") {
      clocks.push(real.reservedUntil - request.windowMs * 1000);
    }
  }
  // expires_at − ttl is the statement's clock, to the millisecond pg keeps of expires_at.
  const answers = answer instanceof Map ? [...answer.values()] : [answer];
  for (const a of answers as Array<{ expiresAt?: unknown; ttlMs?: unknown } | null>) {
    if (a?.expiresAt instanceof Date && typeof a.ttlMs === "number") {
      const t = Math.round((a.expiresAt.getTime() - a.ttlMs) * 1000);
      clocks.push(t, t + 999);
    }
  }
  return clocks.filter((t) => t >= before && t <= after);
}

export interface MirrorCase {
  sem: Semantics;
  request: Request;
  /** The mirrored rows before the statement (exactly the real ones, read back). */
  rows: ReadonlyMap<string, LeaseRow>;
  /** What the statement's snapshot saw, when other statements committed while it waited; else `rows`. */
  snapshot?: ReadonlyMap<string, LeaseRow>;
  before: number;
  after: number;
  /** When a statement that queued got the lock (server µs): where a changed row is re-checked; else its clock. */
  lockedAt?: number;
  realAnswer: unknown;
  /** Real rows after the statement, for every key the request touches; absent when not observable. */
  realRows?: ReadonlyMap<string, RealRow>;
  /**
   * What nextval() of the fence sequence returns next: exactly (the test read the sequence and
   * nothing else draws), or at least (statements that queued together drew in an unknown order).
   */
  fences: { next: number; exact: boolean };
  /** The candidates table as the statement saw it (a release with a successor reads it). */
  candidates?: readonly CandidateRow[];
}

export function judge(c: MirrorCase): Verdict {
  const { matches, problems } = judgeEachClock(c);
  return matches[0] ?? { ok: false, detail: problems.join("; "), rows: new Map(c.rows) };
}

/**
 * Every candidate clock at which the model gives the real answer (and rows), with the rows it
 * leaves; and why each other clock does not. Without the real rows an answer's dates, kept to the
 * millisecond, may fit more than one clock: then only what follows tells which it was.
 */
export function judgeEachClock(c: MirrorCase): { matches: Verdict[]; problems: string[] } {
  const keys = keysOf(c.request);
  const matches: Verdict[] = [];
  const problems: string[] = [];
  for (const t of candidateClocks(c.request, c.before, c.after, c.realRows?.values() ?? [], c.realAnswer)) {
    for (const liveNows of livenessClocks(c, keys, t)) {
      const contexts = new Map<string, StatementContext>(
        keys.map((key, i) => [
          key,
          {
            sem: c.sem,
            now: t,
            liveNow: liveNows[i] ?? t,
            snapshot: (c.snapshot ?? c.rows).get(key) ?? null,
            latest: c.rows.get(key) ?? null,
            drawFence: () => c.fences.next,
            startFence: c.fences.next,
            newTuple: () => -1,
            candidates: c.candidates?.filter((row) => row.key === key) ?? [],
          },
        ]),
      );
      const verdict = judgeAt(c, t, contexts);
      if (typeof verdict !== "string") matches.push(verdict);
      else {
        const judgedBy = liveNows.some((at) => at !== t)
          ? ` (rows judged live by the clock ${liveNows.map((at) => at - c.before).join(", ")} µs after it)`
          : "";
        problems.push(`at clock ${t - c.before} µs after the start bound${judgedBy}: ${verdict}`);
      }
    }
  }
  return { matches, problems };
}

/**
 * The clock_timestamp() each row's liveness may have been judged by, one choice per key, every
 * combination. It is not the statement's now.t: the plan filters the first row before the `now`
 * CTE is evaluated (the lease scan is the nested loop's outer side), each later row after the
 * rows before it were updated, and a row changed while the statement waited for its lock again
 * when it gets the lock (seed 2 step 73 of model-vs-postgres, and its regression there). So any
 * instant within the bounds; only a term ending inside them makes the choice matter, and then
 * both ends are tried (liveness only falls as the clock advances).
 */
function livenessClocks(c: MirrorCase, keys: readonly string[], t: number): number[][] {
  let combinations: number[][] = [[]];
  for (const key of keys) {
    const row = c.rows.get(key) ?? null;
    const snapshot = (c.snapshot ?? c.rows).get(key) ?? null;
    const choices =
      row !== snapshot && c.lockedAt !== undefined
        ? [c.lockedAt]
        : row && row.expiresAt > c.before && row.expiresAt <= c.after
          ? [c.before, c.after]
          : [t];
    combinations = combinations.flatMap((chosen) => choices.map((at) => [...chosen, at]));
  }
  return combinations;
}

/** The model at statement clock `t` with these contexts: a match with the rows it leaves, or why not. */
function judgeAt(c: MirrorCase, t: number, contexts: Map<string, StatementContext>): Verdict | string {
  const model = execute(c.request, contexts);
  const problem =
    "error" in model
      ? sameError(model.error, c.realAnswer)
      : (sameAnswer(model.answer, c.realAnswer, c) ?? sameRows(model.writes, c));
  if (problem !== null) return problem;
  const rows = new Map(c.rows);
  if ("writes" in model) {
    for (const [key, row] of model.writes) {
      if (row) rows.set(key, row);
      else rows.delete(key);
    }
  }
  return { ok: true, detail: `clock ${t}`, rows };
}

/** Statements sent together onto a row another session held locked, then let go. */
export interface QueuedCase {
  sem: Semantics;
  /** The row before any of them, exactly. */
  start: LeaseRow;
  /** In the order sent, each with the server time read just before it was sent and its answer. */
  statements: ReadonlyArray<{ request: Request; before: number; answer: unknown }>;
  /** Server time once every one of them waited for the lock, and when the lock was freed (µs). */
  waiting: number;
  freedAt: number;
  /** What nextval() of the fence sequence returned next before any of them started. */
  nextFence: number;
  /** The row after all of them, exactly. */
  final: RealRow;
}

/**
 * Whether some commit order of the model, with some clock per statement, gives every answer and
 * the final row. Every clock an answer admits is followed, not the first: a statement sent just
 * before its clock was taken fits its start bound and its true clock alike by its answer's
 * dates, and a search that kept the start bound refused PostgreSQL's row (issue 27).
 */
export function admitsQueued(q: QueuedCase): boolean {
  const startRows = new Map([[q.start.key, q.start]]);
  const admits = (pending: readonly number[], rows: Map<string, LeaseRow>): boolean => {
    if (pending.length === 0) return sameFinalRow(q, rows.get(q.start.key));
    return pending.some((i) => {
      const s = q.statements[i];
      if (!s) return false;
      const rest = pending.filter((j) => j !== i);
      const { matches } = judgeEachClock({
        sem: q.sem,
        request: s.request,
        rows,
        snapshot: startRows,
        before: s.before,
        after: q.waiting,
        lockedAt: q.freedAt,
        realAnswer: s.answer,
        fences: { next: q.nextFence, exact: false },
      });
      return matches.some((verdict) => admits(rest, verdict.rows));
    });
  };
  return admits(
    q.statements.map((_, i) => i),
    startRows,
  );
}

function sameFinalRow(q: QueuedCase, row: LeaseRow | undefined): boolean {
  const { final } = q;
  // Clocks known from answers only to the millisecond pg keeps of expires_at.
  const near = (a = 0, b = 0) => Math.abs(a - b) <= 1_000;
  // Every claim draws from the sequence when it starts, won or lost: the model's draw is a floor.
  const counted = q.sem.fenceCounter !== "off";
  return (
    row?.holder === final?.holder &&
    (counted ? (final?.fence ?? 0) >= (row?.fence ?? 0) : row?.fence === final?.fence) &&
    near(row?.expiresAt, final?.expiresAt) &&
    near(row?.acquiredAt, final?.acquiredAt)
  );
}

function sameError(modelError: string, real: unknown): string | null {
  if (!(real instanceof Error)) return `model failed (${modelError}), PostgreSQL answered ${show(real)}`;
  return real.message.includes("check constraint") === modelError.includes("check constraint")
    ? null
    : `model failed with ${modelError}, PostgreSQL with ${real.message}`;
}

/** Discrete fields exactly; dates within the millisecond pg truncates to; ttls within the clock bounds. */
function sameAnswer(model: unknown, real: unknown, c: MirrorCase): string | null {
  if (real instanceof Error) return `PostgreSQL failed (${real.message}), the model answered ${show(model)}`;
  const slackMs = (c.after - c.before) / 1000 + 0.002;
  const differs = (a: unknown, b: unknown, path: string): string | null => {
    if (a instanceof Date && b instanceof Date) {
      return Math.abs(a.getTime() - b.getTime()) <= 1
        ? null
        : `${path}: ${a.toISOString()} vs ${b.toISOString()}`;
    }
    if (a instanceof Map && b instanceof Map) {
      if (a.size !== b.size) return `${path}: ${a.size} vs ${b.size} entries`;
      for (const [k, v] of a) {
        const d = differs(v, b.get(k), `${path}.${k}`);
        if (d) return d;
      }
      return null;
    }
    if (a && b && typeof a === "object" && typeof b === "object") {
      for (const k of new Set([...Object.keys(a), ...Object.keys(b)])) {
        const d = differs(
          (a as Record<string, unknown>)[k],
          (b as Record<string, unknown>)[k],
          `${path}.${k}`,
        );
        if (d) return d;
      }
      return null;
    }
    if (path.endsWith("ttlMs") && typeof a === "number" && typeof b === "number") {
      return Math.abs(a - b) <= slackMs ? null : `${path}: ${a} vs ${b}`;
    }
    if (path.endsWith("fence") && lenientFence(c) && typeof a === "number" && typeof b === "number") {
      return b >= a ? null : `${path}: ${b} is below the model's ${a}`;
    }
    return a === b ? null : `${path}: model ${show(a)}, PostgreSQL ${show(b)}`;
  };
  return differs(model, real, "answer");
}

function sameRows(writes: ReadonlyMap<string, LeaseRow | null>, c: MirrorCase): string | null {
  const slackUs = c.after - c.before + 1;
  for (const [key, real] of c.realRows ?? []) {
    const model = writes.has(key) ? (writes.get(key) ?? null) : (c.rows.get(key) ?? null);
    if (model === null || real === null) {
      if (model !== real) return `row ${key}: model ${show(model)}, PostgreSQL ${show(real)}`;
      continue;
    }
    const fenceOk = lenientFence(c) ? real.fence >= model.fence : model.fence === real.fence;
    if (model.holder !== real.holder || !fenceOk) {
      return `row ${key}: model ${model.holder}/${model.fence}, PostgreSQL ${real.holder}/${real.fence}`;
    }
    if (model.reservedFor !== real.reservedFor) {
      return `row ${key}.reservedFor: model ${show(model.reservedFor)}, PostgreSQL ${show(real.reservedFor)}`;
    }
    if (Math.abs((model.reservedUntil ?? 0) - (real.reservedUntil ?? 0)) > slackUs) {
      return `row ${key}.reservedUntil: model ${model.reservedUntil}, PostgreSQL ${real.reservedUntil} (µs)`;
    }
    for (const field of ["acquiredAt", "expiresAt"] as const) {
      if (Math.abs(model[field] - real[field]) > slackUs) {
        return `row ${key}.${field}: model ${model[field]}, PostgreSQL ${real[field]} (µs)`;
      }
    }
  }
  return null;
}

/** A counted fence known only as a floor: the model drew the lowest value the sequence could give. */
const lenientFence = (c: MirrorCase) => c.sem.fenceCounter !== "off" && !c.fences.exact;

function show(value: unknown): string {
  if (value instanceof Map) return JSON.stringify(Object.fromEntries(value));
  if (value instanceof Error) return `error ${value.message}`;
  return JSON.stringify(value);
}

// The random sequences of the differential test.

export const KEYS = ["k1", "k2"];
// r1 and r2 carry one restart lock, r2's bound later: r2 may take r1's live lease, never the reverse.
export const HOLDERS = ["h1", "h2", "h3", `r1#r:${"a".repeat(32)}.5`, `r2#r:${"a".repeat(32)}.40`];
// Leases of 1–13 ms run out between two statements (each takes about a millisecond with its clock
// reads); 400 ms ones stay live for several.
export const DURATIONS = [1, 2, 3, 5, 8, 13, 50, 400, 400, 400];

/** Mostly the row's own holder and fence, so renewals and releases often match. */
export function drawRequest(rng: Rng, rows: ReadonlyMap<string, LeaseRow>): Request {
  const key = rng.pick(KEYS);
  const row = rows.get(key);
  const holder = row && rng.chance(0.6) ? row.holder : rng.pick(HOLDERS);
  const fence = row && rng.chance(0.8) ? row.fence : rng.int(0, 4);
  const durationMs = rng.pick(DURATIONS);
  // A handover: the reservation's window as short as a lease, so it passes between statements too.
  if (rng.chance(0.08))
    return { kind: "reserve", key, fence, target: rng.pick(HOLDERS), windowMs: durationMs };
  const r = rng.next();
  if (r < 0.32) {
    // Crash takeover: now and then the claim carries holders the kubelet reported dead, often the
    // row's own (with or without a restart proof, the claimer's own among them).
    if (!rng.chance(0.25)) return { kind: "claim", key, holder, durationMs };
    const crashed = [row && rng.chance(0.7) ? row.holder : rng.pick(HOLDERS), rng.pick(HOLDERS)];
    return { kind: "claim", key, holder, durationMs, crashed };
  }
  if (r < 0.57) return { kind: "renew", key, holder, fence, durationMs };
  if (r < 0.67) return { kind: "release", key, holder, fence };
  if (r < 0.8) return { kind: "read", key };
  if (r < 0.95) {
    // Often the holder of both rows, so one statement renews (or releases) two.
    const both = rows.get("k1")?.holder === rows.get("k2")?.holder && row ? row.holder : holder;
    const terms = KEYS.map((k) => ({ key: k, fence: rows.get(k)?.fence ?? 1 }));
    if (r < 0.9) return { kind: "renewMany", holder: both, terms, durationMs };
    return { kind: "releaseMany", holder: both, terms };
  }
  return { kind: "delete", key };
}

/** What the answer was, to show the sequences exercised every branch of the statements. */
export function branch(request: Request, answer: unknown): string {
  if (answer instanceof Error) return `${request.kind}:error`;
  if (request.kind === "claim") {
    const a = answer as { won: boolean; change?: { reason: string } };
    const reason = a.change?.reason;
    return `claim:${a.won ? (reason === "handover" || reason === "crash-takeover" ? reason : "won") : "lost"}`;
  }
  if (request.kind === "renew") return `renew:${(answer as { renewed: boolean }).renewed}`;
  if (request.kind === "renewMany" || request.kind === "releaseMany") {
    return `${request.kind}:${(answer as Map<string, unknown>).size}`;
  }
  return `${request.kind}:${answer === null ? "null" : typeof answer === "object" ? "row" : answer}`;
}
