// Whom a handover goes to, and the handover itself as the operator and the library ask for it:
// pick a live candidate (named, or the best), reserve the lease for it in the term the caller saw,
// then, when asked to, wait until it leads or the reservation has passed.
import { setTimeout as sleep } from "node:timers/promises";
import { provenDeadPredecessor } from "../election/identity.ts";
import type { Candidate, CandidateStore } from "../postgres/candidates.ts";
import type { HandoverStore } from "../postgres/handover.ts";

/** The default reservation: long enough for a leader to drain its work (5 s by default) and release. */
export const DEFAULT_RESERVATION_MS = 10_000;

/** Refused before anything was written: no term to hand over, or no live candidate to take it. */
export class HandoverRefused extends Error {
  constructor(message: string) {
    super(message);
    this.name = "HandoverRefused";
  }
}

/** The reservation was written but the named candidate did not lead within it. */
export class HandoverNotTaken extends Error {
  constructor(message: string) {
    super(message);
    this.name = "HandoverNotTaken";
  }
}

/**
 * Best first: higher priority; then a candidate of the newest revision (the revision of the
 * candidate that began campaigning last: in a rollout, the new pods); then the longest campaigning.
 * Ties go to the holder first in code-unit order. A graceful stop's release ranks in SQL
 * (src/postgres/statement-parts.ts, SUCCESSOR): test/candidacy/successor-ranking.test.ts holds the
 * two to the same choice, so a change here is a change there.
 */
export function rankCandidates(candidates: readonly Candidate[]): Candidate[] {
  const newest = [...candidates]
    .filter((c) => c.revision !== null)
    .sort((a, b) => b.startedAt.getTime() - a.startedAt.getTime() || byHolder(a, b))[0]?.revision;
  const ofNewest = (c: Candidate) => (newest !== undefined && c.revision === newest ? 1 : 0);
  return [...candidates].sort(
    (a, b) =>
      b.priority - a.priority ||
      ofNewest(b) - ofNewest(a) ||
      a.startedAt.getTime() - b.startedAt.getTime() ||
      byHolder(a, b),
  );
}

/** Code-unit order, which is PostgreSQL's COLLATE "C" (UTF-8 byte order) for every holder without astral characters. */
const byHolder = (a: Candidate, b: Candidate) => (a.holder < b.holder ? -1 : a.holder > b.holder ? 1 : 0);

/**
 * The candidates that could take `key` from `holder` now: live, willing to lead, neither the holder
 * nor a predecessor it proved dead (a restart in place: its row stays live until its seen_until).
 */
export function eligible(candidates: readonly Candidate[], holder: string): Candidate[] {
  return candidates.filter(
    (c) => c.live && c.leads && c.holder !== holder && !provenDeadPredecessor(holder, c.holder),
  );
}

function describe(candidates: readonly Candidate[]): string {
  return candidates.length === 0
    ? "there is no live candidate"
    : `the live candidates are ${candidates.map((c) => `${c.pod} (${c.holder}, priority ${c.priority})`).join(", ")}`;
}

/** The candidate `to` names (a holder, or a pod with one candidate), or the best one without `to`. */
export function chooseTarget(key: string, live: readonly Candidate[], to: string | undefined): Candidate {
  if (to === undefined) {
    const best = rankCandidates(live)[0];
    if (!best) throw new HandoverRefused(`cannot hand over lease ${key}: ${describe(live)}`);
    return best;
  }
  const named = live.filter((c) => c.holder === to || c.pod === to);
  if (named.length === 1 && named[0]) return named[0];
  if (named.length > 1) {
    throw new HandoverRefused(
      `cannot hand over lease ${key} to ${to}: several processes of that pod campaign; name one holder: ${named.map((c) => c.holder).join(", ")}`,
    );
  }
  throw new HandoverRefused(
    `cannot hand over lease ${key} to ${to}: not a live candidate; ${describe(live)}`,
  );
}

export interface HandoverRequest {
  /** A holder or a pod name; without it the best live candidate. */
  to?: string;
  /** How long only the target may claim (default 10 s). */
  reservationMs?: number;
  /** Wait until the target leads (default true); false returns once the reservation is written. */
  wait?: boolean;
}

export interface HandoverResult {
  key: string;
  from: string;
  fromFence: number;
  to: Candidate;
  /** The target's fence once it leads; null when not waited for. */
  fence: number | null;
  /** From the reservation to the target's claim seen, ms; null when not waited for. */
  tookMs: number | null;
}

/** How often a waiting handover looks at the row: a few statements per handover, from one process. */
const LOOK_EVERY_MS = 25;

export async function handOver(
  stores: { handovers: HandoverStore; candidates: CandidateStore },
  key: string,
  request: HandoverRequest = {},
  /** Ends the wait for the target (the leases closing), with the signal's reason. */
  signal?: AbortSignal,
): Promise<HandoverResult> {
  const reservationMs = request.reservationMs ?? DEFAULT_RESERVATION_MS;
  const lease = await stores.handovers.reservation(key);
  if (!lease?.live) throw new HandoverRefused(`lease ${key} is not held: nothing to hand over`);
  const live = eligible(await stores.candidates.list(key), lease.holder);
  const target = chooseTarget(key, live, request.to);
  const startedAt = performance.now();
  const reserved = await stores.handovers.reserve(key, lease.fence, target.holder, reservationMs);
  if (!reserved) {
    throw new HandoverRefused(
      `lease ${key} changed hands or was released while the handover was being asked (it was held by ${lease.holder} with fence ${lease.fence}): look again with pglease status`,
    );
  }
  const result = { key, from: reserved.holder, fromFence: reserved.fence, to: target };
  if (request.wait === false) return { ...result, fence: null, tookMs: null };
  for (;;) {
    signal?.throwIfAborted();
    const now = await stores.handovers.reservation(key);
    if (now?.live && now.holder === target.holder) {
      return { ...result, fence: now.fence, tookMs: performance.now() - startedAt };
    }
    if (
      !now ||
      (now.reservedFor !== target.holder && now.fence !== reserved.fence) ||
      now.reservedForMs <= 0
    ) {
      const state = now?.live ? `held by ${now.holder} with fence ${now.fence}` : "free to any candidate";
      throw new HandoverNotTaken(
        `asked ${reserved.holder} to hand lease ${key} to ${target.holder}, but it did not lead within the ${reservationMs} ms reservation; the lease is ${state}`,
      );
    }
    // Rejected with the signal's reason, not timers' AbortError: the caller says why it ended.
    await sleep(LOOK_EVERY_MS, undefined, signal ? { signal } : {}).catch((error: unknown) => {
      throw signal?.reason ?? error;
    });
  }
}
