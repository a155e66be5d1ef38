// The publisher's public surface: what the sidecar passes in, what it gets back, and the
// observations it turns into metrics (prom-client lives in src/observability, not here).

import type { Clock } from "../shared/clock.ts";
import type { Logger } from "../shared/logger.ts";
import type { BackoffTiming } from "./backoff.ts";
import type { Pod } from "./client/api-types.ts";
import type { KubeConnection } from "./client/connection.ts";
import type { LeadershipState } from "./desired-state.ts";
import type { PublishConfig } from "./publish-config.ts";

export interface PatchObservation {
  target: "metadata" | "status" | "peer";
  ok: boolean;
  durationMs: number;
  status?: number;
}

export interface PublishedObservation {
  role: LeadershipState["role"];
  fence: number | null;
  /** From the setDesired() that changed the role to the first sight of the pod showing it. */
  sinceChangeMs: number;
}

export interface PublishTiming {
  /** Every API request is abandoned after this long. */
  requestTimeoutMs: number;
  backoff: BackoffTiming;
  /** start() resolves after the first publish or after this long, whichever comes first. */
  startTimeoutMs: number;
  /** Attempts per Kubernetes Event before it is dropped. */
  eventAttempts: number;
}

export const DEFAULT_TIMING: PublishTiming = {
  requestTimeoutMs: 5_000,
  backoff: { initialMs: 250, maxMs: 4_000 },
  startTimeoutMs: 10_000,
  eventAttempts: 3,
};

export interface PodPublisherOptions {
  /** Where the API server is and how to authenticate (client/load-connection.ts loads it). */
  connection: KubeConnection;
  config: PublishConfig;
  logger: Logger;
  onPatch?: (e: PatchObservation) => void;
  onPublished?: (e: PublishedObservation) => void;
  random?: () => number;
  /** Durations, timeouts, backoff and the fallback resync; a monotonic real-time clock when left out. */
  clock?: Clock;
  /** Wall clock, for lastTransitionTime and event timestamps. */
  wallClock?: () => Date;
  timing?: Partial<PublishTiming>;
  /**
   * Whether `term` is still this process's current term (the elector's word, e.g.
   * `elector.isLeader() && elector.status().fence === term.fence`). Asked after listing peers,
   * before each peer is demoted and before the pod is labelled leader: a term that ended meanwhile
   * stops there. Without it only the newest setDesired() counts.
   */
  stillLeads?: (term: LeadershipState) => boolean;
  /**
   * How many claims and renews of `term` the elector has accepted so far (null when it does not
   * lead `term`). With it, a superseded-by annotation at or above the term's fence that a renew
   * after its read proves stale (a fence sequence that went back) is replaced and the pod labelled
   * (see reconcile's staleFenceProven); without it such a pod is never labelled leader.
   */
  renewals?: (term: LeadershipState) => number | null;
  /** Every version of this pod the publisher sees (its watch, its patches): the health gate reads it. */
  onPod?: (pod: Pod) => void;
  /** The peers the peer view holds, after each change it takes in (crash takeover reads their statuses). */
  onPeers?: (peers: Pod[]) => void;
}

/** start() rejects with a PublishConfigError (publish-config.ts) when the pod's peers cannot be found. */
export interface StartResult {
  /** The pod showed the initial state before startTimeoutMs. */
  published: boolean;
  /** Permissions the Role lacks, e.g. "patch pods/status"; empty when all are granted or unknown. */
  missingPermissions: string[];
}

export interface PodPublisher {
  start(initial: LeadershipState): Promise<StartResult>;
  setDesired(state: LeadershipState): void;
  /** Sets follower and waits, at most timeoutMs, until the pod shows it; `why` goes into the Event. Ends a hold. */
  demote(timeoutMs: number, why?: string): Promise<boolean>;
  /**
   * Writes nothing more to this pod until demote(): its pod is being deleted and a new leader takes
   * its label off (peer demotion), so its own writes would only queue beside that demotion at the
   * API server. setDesired() still records the state; demote() writes it.
   */
  holdOwnWrites(): void;
  /**
   * Ends a hold once the lease is released (not at the SIGTERM, which a preStop hook can hold
   * back for minutes): waits, at most half of timeoutMs, for a new leader to take this
   * pod's leader label off while another pod not being deleted could lead, and demotes the pod
   * itself (within the rest) only if none did. Resolves true once the pod no longer shows leader
   * (or shows the state demote() wrote).
   */
  endHold(timeoutMs: number): Promise<boolean>;
  state(): { published: boolean; lastError?: string };
  /** The other pods of this lease (the peer selector), as the API server lists them now. */
  listPeers(): Promise<Pod[]>;
  stop(): Promise<void>;
}
