// Kubernetes Events on the pod for each gain and loss of leadership, best effort: a few
// attempts each, then logged and dropped. They are for humans (`kubectl describe pod`);
// nothing depends on them, so they never hold up publishing or shutdown for long: each waits
// until the pod shows the change it reports, so that in a handover it takes neither a connection
// nor the API server's time from the requests that move the label.

import type { Clock } from "../shared/clock.ts";
import type { Logger } from "../shared/logger.ts";
import { type BackoffTiming, backoffDelay, pause } from "./backoff.ts";
import type { CoreEvent } from "./client/api-types.ts";
import type { LeadershipState } from "./desired-state.ts";
import { KubeRequestError, type PodApi } from "./pod-api.ts";

export type LeadershipEventReason = "LeaderElected" | "LeadershipLost";

export interface EventRecorderOptions {
  api: PodApi;
  namespace: string;
  podName: string;
  logger: Logger;
  /** The uid of the publisher's pod (its events' involvedObject); read from the API when not known yet. */
  podUid: () => string | undefined;
  attempts: number;
  backoff: BackoffTiming;
  random: () => number;
  /** Paces retries. */
  clock: Clock;
  /** Stamps the events. */
  wallClock: () => Date;
  /** Aborts retries' pauses when the publisher stops. */
  stopSignal: AbortSignal;
  /**
   * Resolves once the pod shows its desired state, or after a bound. Sent beside a handover's
   * passes, an event took the one kept-alive connection, and the quorum list then opened a new one.
   */
  published: () => Promise<unknown>;
}

/** The events a change of desired state calls for: a loss, a gain, or both when the term changed. */
export function leadershipTransitions(
  previous: LeadershipState | undefined,
  next: LeadershipState,
  podName: string,
): Array<{ reason: LeadershipEventReason; message: string }> {
  const out: Array<{ reason: LeadershipEventReason; message: string }> = [];
  const wasLeader = previous?.role === "leader";
  if (wasLeader && (next.role !== "leader" || previous.fence !== next.fence)) {
    const fence = previous.fence === null ? "" : ` (fence ${previous.fence})`;
    const why = next.role !== "leader" && next.why ? `: ${next.why}` : "";
    out.push({ reason: "LeadershipLost", message: `${podName} lost lease ${previous.lease}${fence}${why}` });
  }
  if (next.role === "leader" && (!wasLeader || previous.fence !== next.fence)) {
    const fence = next.fence === null ? "" : ` with fence ${next.fence}`;
    out.push({ reason: "LeaderElected", message: `${podName} became leader of lease ${next.lease}${fence}` });
  }
  return out;
}

// Beyond this many unsent events the oldest are dropped: a flapping elector must not grow memory.
const MAX_PENDING = 20;

interface PendingEvent {
  reason: LeadershipEventReason;
  message: string;
  at: Date;
  sequence: number;
}

export function createEventRecorder(opts: EventRecorderOptions) {
  const pending: PendingEvent[] = [];
  let sequence = 0;
  let dropped = 0;
  let sending: Promise<void> | null = null;

  async function drain(): Promise<void> {
    for (let next = pending.shift(); next; next = pending.shift()) {
      await opts.published();
      await send(opts, next);
    }
    sending = null;
    if (dropped > 0) {
      opts.logger.warn(
        { dropped },
        "leadership changed faster than events could be sent; the oldest were dropped",
      );
      dropped = 0;
    }
  }

  return {
    record(reason: LeadershipEventReason, message: string): void {
      if (pending.length >= MAX_PENDING) {
        pending.shift();
        dropped++;
      }
      pending.push({ reason, message, at: opts.wallClock(), sequence: sequence++ });
      // Started on a later tick: the caller (setDesired) must return before any request work.
      sending ??= Promise.resolve().then(drain);
    },
    /** Resolves once every recorded event was sent or given up on. */
    flushed(): Promise<void> {
      return sending ?? Promise.resolve();
    },
  };
}

export type EventRecorder = ReturnType<typeof createEventRecorder>;

/** Sends one event, a few attempts at most; a failure is logged and dropped, never thrown. */
async function send(opts: EventRecorderOptions, event: PendingEvent): Promise<void> {
  for (let attempt = 0; attempt < opts.attempts; attempt++) {
    try {
      const uid = opts.podUid() ?? (await opts.api.readPod()).metadata?.uid;
      await opts.api.createEvent(eventFor(opts, uid, event));
      return;
    } catch (error) {
      const last = attempt === opts.attempts - 1 || opts.stopSignal.aborted;
      const forbidden = error instanceof KubeRequestError && error.kind === "forbidden";
      if (last || forbidden) {
        opts.logger[forbidden ? "error" : "warn"](
          { reason: event.reason, err: error instanceof Error ? error.message : String(error) },
          forbidden
            ? `event not recorded: missing permission ${error.permission.verb} ${error.permission.resource} in namespace ${opts.namespace}`
            : "event not recorded after retries; dropping it",
        );
        return;
      }
      await pause(opts.clock, backoffDelay(attempt, opts.backoff, opts.random), opts.stopSignal);
    }
  }
}

function eventFor(opts: EventRecorderOptions, uid: string | undefined, event: PendingEvent): CoreEvent {
  const { at, sequence } = event;
  return {
    apiVersion: "v1",
    kind: "Event",
    metadata: {
      // client-go's scheme (pod name, hex nanoseconds); the sequence keeps same-millisecond events apart.
      name: `${opts.podName}.${(BigInt(at.getTime()) * 1_000_000n + BigInt(sequence % 1_000_000)).toString(16)}`,
      namespace: opts.namespace,
    },
    involvedObject: {
      apiVersion: "v1",
      kind: "Pod",
      name: opts.podName,
      namespace: opts.namespace,
      uid,
    },
    reason: event.reason,
    message: event.message,
    type: "Normal",
    source: { component: "pglease" },
    reportingComponent: "pglease",
    reportingInstance: opts.podName,
    firstTimestamp: at.toISOString(),
    lastTimestamp: at.toISOString(),
    count: 1,
  };
}
