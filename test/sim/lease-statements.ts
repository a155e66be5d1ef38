// The lease statements of src/postgres/store.ts as the model executes them: one function per
// statement, each a pure function of the row versions the statement sees and its own
// clock_timestamp(). The server model (server.ts) decides WHEN a statement sees what (time taken
// at start, row lock, commit order); this file decides WHAT it does then. The switches are the
// safety fixes of issue 12, one by one: all off is the SQL before them (BEFORE_FIXES), profile.ts
// says which ones the store ships, and model-vs-postgres.test.ts holds the model to its answers.
import { eligible, rankCandidates } from "../../src/candidacy/plan.ts";
import { provenDeadPredecessor, restartProof } from "../../src/election/identity.ts";
import type { ClaimAnswer, LeaseView, RenewAnswer } from "../../src/election/ports.ts";

/** A row version. Times are µs on the server's clock; `tuple` names the row across updates (a DELETE ends it). */
export interface LeaseRow {
  key: string;
  holder: string;
  fence: number;
  acquiredAt: number;
  expiresAt: number;
  tuple: number;
  /** Its term was ended by a release: the history then calls the next claim `claim`. */
  released?: true;
  /** A handover's reservation (pglease handover): only this holder may claim until reservedUntil. */
  reservedFor?: string;
  reservedUntil?: number;
  /** Session takeover: the notice session this term's claim recorded (session_fence = fence). */
  session?: number;
}

/** A row of the candidates table (times µs on the server's clock): what a release with a successor reads. */
export interface CandidateRow {
  key: string;
  holder: string;
  priority: number;
  revision: string | null;
  leads: boolean;
  startedAt: number;
  seenUntil: number;
}

export interface Semantics {
  /** Within one term the expiry only grows: greatest(lease.expires_at, now + d). */
  monotonicExpiry: boolean;
  /**
   * Every winning claim gets a new fence from a counter the row does not own: "off" is today's
   * lease.fence + 1; "at-lock" draws when the row is written; "at-start" draws when the statement
   * starts (nextval in the INSERT's SELECT), before it waits for the row lock.
   */
  fenceCounter: "off" | "at-lock" | "at-start";
  /** A counted fence is raised to lease.fence + 1 when below it: greatest(nextval, lease.fence + 1). */
  fenceAboveRow: boolean;
  /**
   * renew and release judge `expires_at > clock_timestamp()` when they reach the row, and again
   * when they re-check a version updated while they waited for its lock: not by the start clock.
   */
  liveAtLock: boolean;
  /** release sets expires_at = now, acquired_at = least(acquired_at, now − 1 µs); off: greatest(now, acquired_at + 1 µs). */
  releaseAtNow: boolean;
  /**
   * claim takes a live lease whose holder carries the claimer's restart lock bound earlier
   * (`#r:<32 hex>.<bind instant>`, issue 17).
   */
  restartTakeover: boolean;
}

/** The lease SQL before the safety fixes (main at b60b60e), where known-holes.md was found. */
export const BEFORE_FIXES: Semantics = {
  monotonicExpiry: false,
  fenceCounter: "off",
  fenceAboveRow: false,
  liveAtLock: false,
  releaseAtNow: false,
  restartTakeover: false,
};

export interface StatementContext {
  sem: Semantics;
  /** The statement's clock_timestamp(), taken when it started, before any lock wait. */
  now: number;
  /**
   * clock_timestamp() when the statement reached this row (its scan, after any earlier row's lock
   * wait), or when it got the lock if the row was updated meanwhile (EvalPlanQual re-checks then).
   */
  liveNow: number;
  /** The key's row as the statement's snapshot (taken at start) saw it. */
  snapshot: LeaseRow | null;
  /** The newest committed version once the row lock is held (for a read: the snapshot). */
  latest: LeaseRow | null;
  /** Draws from the fence counter now (fenceCounter "at-lock"). */
  drawFence: () => number;
  /** The counter value drawn when the statement started (fenceCounter "at-start"), else null. */
  startFence: number | null;
  newTuple: () => number;
  /**
   * Session takeover: whether a session no longer shows in pg_stat_activity, as the statement's
   * statistics snapshot sees it (absent: nothing is ever gone, the differential test's store).
   */
  sessionGone?: (session: number) => boolean;
  /** The key's rows of the candidates table, as the statement sees them (absent: none). */
  candidates?: readonly CandidateRow[];
}

/** SESSION_GONE: the term recorded a session, and it has ended. */
const sessionGone = (ctx: StatementContext, row: LeaseRow) =>
  row.session !== undefined && (ctx.sessionGone?.(row.session) ?? false);

/** An answer, and the row version to commit (undefined: no change; null: the row is gone). */
export type Executed<A> = { answer: A; write?: LeaseRow | null } | { error: string };

const CHECK_VIOLATION = 'new row for relation violates check constraint "expires_after_acquired"';

const ms = (us: number) => us / 1000;
const date = (us: number) => new Date(Math.floor(us / 1000));

/** UPDATE … WHERE key = $1 finds the row through its snapshot and follows it to the newest version. */
function updatable(ctx: StatementContext): LeaseRow | null {
  const { snapshot, latest } = ctx;
  return snapshot && latest && snapshot.tuple === latest.tuple ? latest : null;
}

function newExpiry(ctx: StatementContext, row: LeaseRow | null, durationUs: number): number {
  const proposed = ctx.now + durationUs;
  return ctx.sem.monotonicExpiry && row ? Math.max(row.expiresAt, proposed) : proposed;
}

/**
 * INSERT … ON CONFLICT (key) DO UPDATE … WHERE lease.holder = EXCLUDED.holder OR
 * lease.expires_at <= EXCLUDED.acquired_at, then the `current` CTE (FOR SHARE) when it loses.
 */
export function claim(
  ctx: StatementContext,
  key: string,
  holder: string,
  durationMs: number,
  session?: number,
  crashed: readonly string[] = [],
): Executed<ClaimAnswer> {
  // The term records the claimer's session, or none: an older one's never outlives its term.
  const recorded = session === undefined ? {} : { session };
  const { now, latest, sem } = ctx;
  const durationUs = durationMs * 1000;
  const counted = () => {
    const drawn = sem.fenceCounter === "at-start" ? (ctx.startFence ?? 0) : ctx.drawFence();
    return sem.fenceAboveRow && latest ? Math.max(drawn, latest.fence + 1) : drawn;
  };
  if (latest === null) {
    const fence = sem.fenceCounter === "off" ? 1 : counted();
    const row = {
      key,
      holder,
      fence,
      acquiredAt: now,
      expiresAt: now + durationUs,
      tuple: ctx.newTuple(),
      ...recorded,
    };
    return { answer: won(row, now, { reason: "claim", previousHolder: null }), write: row };
  }
  // The conflicting row is locked and judged in its newest version, visible to the snapshot or not.
  const gone = latest.holder !== holder && sessionGone(ctx, latest);
  // The crash clause: this exact holder, with a restart proof, was reported dead by the kubelet.
  const reported =
    latest.holder !== holder && crashed.includes(latest.holder) && restartProof(latest.holder) !== null;
  const takesOver = (sem.restartTakeover && provenDeadPredecessor(holder, latest.holder)) || gone || reported;
  // A handover's reservation shuts out everyone but the named candidate until it passes.
  const shutOut = reservedAgainst(latest, holder) && (latest.reservedUntil ?? 0) > now;
  if ((latest.holder !== holder && latest.expiresAt > now && !takesOver) || shutOut) {
    // `current` reads through the snapshot: a row inserted after the statement started is not seen.
    const seen = updatable(ctx);
    if (!seen) return { answer: { won: false, holder: null, fence: null, expiresAt: null, ttlMs: null } };
    // Shut out by a reservation, the claimer sees the lease taken until it passes.
    const expiresAt = reservedAgainst(seen, holder)
      ? Math.max(seen.expiresAt, seen.reservedUntil ?? seen.expiresAt)
      : seen.expiresAt;
    return {
      answer: {
        won: false,
        holder: seen.holder,
        fence: seen.fence,
        expiresAt: date(expiresAt),
        ttlMs: ms(expiresAt - now),
      },
    };
  }
  // Today: the same holder on a live lease keeps its term (fence and acquired_at).
  const sameLive = latest.holder === holder && latest.expiresAt > now;
  const keepsTerm = sameLive && sem.fenceCounter === "off";
  const fence = sem.fenceCounter === "off" ? (sameLive ? latest.fence : latest.fence + 1) : counted();
  const acquiredAt = keepsTerm ? latest.acquiredAt : now;
  const expiresAt = newExpiry(ctx, sameLive || takesOver ? latest : null, durationUs);
  if (expiresAt <= acquiredAt) return { error: CHECK_VIOLATION };
  const row = { key, holder, fence, acquiredAt, expiresAt, tuple: latest.tuple, ...recorded };
  return { answer: won(row, now, changeOf(latest, holder, now, gone, reported)), write: row };
}

/** The row carries a reservation (passed or not) for another holder than `holder`. */
function reservedAgainst(row: LeaseRow, holder: string): boolean {
  return row.reservedUntil !== undefined && row.reservedFor !== holder;
}

/** The history trigger's reason, from the locked row the claim replaced. */
function changeOf(
  latest: LeaseRow,
  holder: string,
  now: number,
  sessionTakeover: boolean,
  crashTakeover = false,
): { reason: string; previousHolder: string } {
  // The claim names a crash takeover itself (a live term of a holder reported dead), before the trigger infers.
  const reason =
    crashTakeover && latest.expiresAt > now
      ? "crash-takeover"
      : latest.reservedFor === holder && (latest.reservedUntil ?? 0) > now
        ? "handover"
        : latest.released
          ? "claim"
          : latest.holder === holder
            ? "new-term"
            : latest.expiresAt <= now
              ? "expiry-takeover"
              : sessionTakeover
                ? "session-takeover"
                : "restart-takeover";
  return { reason, previousHolder: latest.holder };
}

function won(
  row: LeaseRow,
  now: number,
  change: NonNullable<ClaimAnswer & { won: true }>["change"],
): ClaimAnswer {
  return {
    won: true,
    fence: row.fence,
    acquiredAt: date(row.acquiredAt),
    expiresAt: date(row.expiresAt),
    ttlMs: ms(row.expiresAt - now),
    ...(change ? { change } : {}),
  };
}

/** The term is live: `expires_at > clock_timestamp()` (liveAtLock) or `> now.t`. */
function live(ctx: StatementContext, row: LeaseRow): boolean {
  return row.expiresAt > (ctx.sem.liveAtLock ? ctx.liveNow : ctx.now);
}

/** UPDATE … SET expires_at = now + d WHERE key AND holder AND fence AND the term is live. */
export function renew(
  ctx: StatementContext,
  holder: string,
  fence: number,
  durationMs: number,
): Executed<RenewAnswer> {
  const row = updatable(ctx);
  // NOT SESSION_GONE: a term whose recorded session is gone may already be taken over.
  if (!row || row.holder !== holder || row.fence !== fence || !live(ctx, row) || sessionGone(ctx, row)) {
    return { answer: { renewed: false } };
  }
  const expiresAt = newExpiry(ctx, row, durationMs * 1000);
  if (expiresAt <= row.acquiredAt) return { error: CHECK_VIOLATION };
  return {
    answer: { renewed: true, expiresAt: date(expiresAt), ttlMs: ms(expiresAt - ctx.now) },
    write: { ...row, expiresAt },
  };
}

export type RenewManyAnswer = Map<string, { fence: number; expiresAt: Date; ttlMs: number }>;

/**
 * UPDATE … FROM unnest($keys, $fences) WHERE key AND fence AND holder AND expires_at > now: the
 * renew above per row, in one statement (one CHECK failure fails them all).
 */
export function renewMany(
  contexts: ReadonlyMap<string, StatementContext>,
  holder: string,
  terms: ReadonlyArray<{ key: string; fence: number }>,
  durationMs: number,
): { answer: RenewManyAnswer; writes: LeaseRow[] } | { error: string } {
  const answer: RenewManyAnswer = new Map();
  const writes: LeaseRow[] = [];
  for (const term of terms) {
    const ctx = contexts.get(term.key);
    if (!ctx) continue;
    const one = renew(ctx, holder, term.fence, durationMs);
    if ("error" in one) return one;
    if (one.answer.renewed && one.write) {
      answer.set(term.key, { fence: term.fence, expiresAt: one.answer.expiresAt, ttlMs: one.answer.ttlMs });
      writes.push(one.write);
    }
  }
  return { answer, writes };
}

/**
 * UPDATE … SET (END_TERM) WHERE key AND holder AND fence AND the term is live, and pg_notify on
 * commit when a row was released. With `successorMs` (a graceful stop), the same UPDATE reserves
 * the lease for the best live candidate that leads, other than the holder, by the statement's
 * clock, ranked as rankCandidates ranks them (the SQL's SUCCESSOR, which the differential test
 * holds to this), and none of `crashed` (reported terminated); without one the row's reservation
 * stays as it was.
 */
export function release(
  ctx: StatementContext,
  holder: string,
  fence: number,
  successorMs?: number,
  crashed: readonly string[] = [],
): Executed<boolean> {
  const row = updatable(ctx);
  if (!row || row.holder !== holder || row.fence !== fence || !live(ctx, row)) {
    return { answer: false };
  }
  const { now } = ctx;
  const ended = ctx.sem.releaseAtNow
    ? { expiresAt: now, acquiredAt: Math.min(row.acquiredAt, now - 1) }
    : { expiresAt: Math.max(now, row.acquiredAt + 1) };
  const successor = successorMs === undefined ? undefined : successorOf(ctx, holder, crashed);
  const reserved = successor
    ? { reservedFor: successor, reservedUntil: now + (successorMs ?? 0) * 1000 }
    : {};
  return { answer: true, write: { ...row, ...ended, ...reserved, released: true } };
}

/** The candidate a release with a successor reserves for: what TypeScript sees of the rows (Dates, to the ms). */
function successorOf(ctx: StatementContext, holder: string, crashed: readonly string[]): string | undefined {
  const seen = (ctx.candidates ?? []).map((c) => ({
    key: c.key,
    holder: c.holder,
    pod: `${c.holder}-pod`,
    priority: c.priority,
    revision: c.revision,
    leads: c.leads,
    startedAt: date(c.startedAt),
    seenAt: date(c.startedAt),
    live: c.seenUntil > ctx.now,
  }));
  return rankCandidates(eligible(seen, holder).filter((c) => !crashed.includes(c.holder)))[0]?.holder;
}

/**
 * UPDATE … FROM unnest($keys, $fences) SET (END_TERM) WHERE key AND fence AND holder AND live, and
 * pg_notify per released row: the release above per row (its successor too), in one statement.
 */
export function releaseMany(
  contexts: ReadonlyMap<string, StatementContext>,
  holder: string,
  terms: ReadonlyArray<{ key: string; fence: number }>,
  successorMs?: number,
  crashed: readonly string[] = [],
): { answer: Map<string, number>; writes: LeaseRow[] } | { error: string } {
  const answer = new Map<string, number>();
  const writes: LeaseRow[] = [];
  for (const term of terms) {
    const ctx = contexts.get(term.key);
    if (!ctx || answer.has(term.key)) continue;
    const one = release(ctx, holder, term.fence, successorMs, crashed);
    if ("error" in one) return one;
    if (one.answer && one.write) {
      answer.set(term.key, term.fence);
      writes.push(one.write);
    }
  }
  return { answer, writes };
}

/** SELECT … WHERE key = $1, with the ttl by the statement's clock: no lock, the snapshot's version. */
export function read(ctx: StatementContext): Executed<LeaseView | null> {
  const row = ctx.snapshot;
  if (!row) return { answer: null };
  return {
    answer: {
      key: row.key,
      holder: row.holder,
      fence: row.fence,
      acquiredAt: date(row.acquiredAt),
      expiresAt: date(row.expiresAt),
      ttlMs: ms(row.expiresAt - ctx.now),
      ...(sessionGone(ctx, row) ? { sessionGone: true } : {}),
    },
  };
}

/**
 * pglease handover: UPDATE … SET reserved_for, reserved_until = now + window WHERE key AND fence
 * AND holder <> target AND the term is live (clock_timestamp() at the row), NOTIFY on commit.
 */
export function reserve(
  ctx: StatementContext,
  fence: number,
  target: string,
  windowMs: number,
): Executed<{ holder: string; fence: number; reservedFor: string; reservedForMs: number } | null> {
  const row = updatable(ctx);
  if (!row || row.fence !== fence || row.holder === target || row.expiresAt <= ctx.liveNow) {
    return { answer: null };
  }
  const reservedUntil = ctx.now + windowMs * 1000;
  return {
    answer: { holder: row.holder, fence: row.fence, reservedFor: target, reservedForMs: windowMs },
    write: { ...row, reservedFor: target, reservedUntil },
  };
}

/** An operator's DELETE FROM … WHERE key = $1 (the README says never; the model can). */
export function deleteRow(ctx: StatementContext): Executed<boolean> {
  const row = updatable(ctx);
  return row ? { answer: true, write: null } : { answer: false };
}
