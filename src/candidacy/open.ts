// The candidacy of one lease stack, wired from what openLeases has: its pool and table, its holder
// and pod, its release feed (whose second channel carries handover requests) and its logger.
import type pg from "pg";
import { type Candidate, CandidateStore } from "../postgres/candidates.ts";
import { HandoverStore } from "../postgres/handover.ts";
import type { LeaseTable } from "../postgres/table.ts";
import { type AnnounceAnswer, Candidacy } from "./candidacy.ts";
import { type HandoverRequest, type HandoverResult, handOver } from "./plan.ts";

export interface CandidacyWiring {
  pool: pg.Pool;
  table: LeaseTable;
  holder: string;
  pod: string;
  revision: string | null;
  feed: { subscribeHandovers(listener: (key: string) => void): () => void } | undefined;
  statementTimeoutMs: number;
  onAnnounced?: ((answer: AnnounceAnswer) => void) | undefined;
  log: {
    info(message: string, fields?: Record<string, unknown>): void;
    warn(message: string, fields?: Record<string, unknown>): void;
  };
}

export interface OpenCandidacy {
  candidacy: Candidacy;
  candidates(key?: string): Promise<Candidate[]>;
  /** `signal` ends a handover still waiting for its target. */
  handover(key: string, request?: HandoverRequest, signal?: AbortSignal): Promise<HandoverResult>;
}

export function openCandidacy(w: CandidacyWiring): OpenCandidacy {
  const candidates = new CandidateStore(w.pool, w.table, w.statementTimeoutMs);
  const handovers = new HandoverStore(w.pool, w.table, w.statementTimeoutMs);
  const feed = w.feed;
  const candidacy = new Candidacy({
    candidates,
    handovers,
    holder: w.holder,
    pod: w.pod,
    revision: w.revision,
    ...(feed
      ? { subscribeHandovers: (listener: (key: string) => void) => feed.subscribeHandovers(listener) }
      : {}),
    statementTimeoutMs: w.statementTimeoutMs,
    ...(w.onAnnounced ? { onAnnounced: w.onAnnounced } : {}),
    warn: (message, fields) => w.log.warn(message, fields),
    info: (message, fields) => w.log.info(message, fields),
  });
  return {
    candidacy,
    candidates: (key) => candidates.list(key ?? null),
    handover: (key, request, signal) => handOver({ handovers, candidates }, key, request, signal),
  };
}
