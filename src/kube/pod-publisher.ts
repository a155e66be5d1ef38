// Publishes the elector's state onto its own pod, level-triggered: one worker loop compares
// the newest desired state with the pod as last seen and patches only the difference, until
// they match. The elector never waits on it: setDesired() records the state and returns.
import type { V1Pod } from "@kubernetes/client-node";
import { backoffDelay, pause } from "./backoff.ts";
import {
  conditionPatch,
  type DesiredPod,
  desiredPod,
  type LeadershipState,
  metadataPatch,
  podShows,
} from "./desired-state.ts";
import { createEventRecorder, leadershipTransitions } from "./leadership-events.ts";
import { demoteStalePeers } from "./peer-demotion.ts";
import { checkPermissions } from "./permission-check.ts";
import { createPodApi, KubeRequestError, permissionName } from "./pod-api.ts";
import { watchOwnPod } from "./pod-watch.ts";
import { defaultPeerSelector } from "./publish-config.ts";
import { createPublishTracker } from "./publish-tracker.ts";
import {
  DEFAULT_TIMING,
  type PatchObservation,
  type PodPublisher,
  type PodPublisherOptions,
  type StartResult,
} from "./publisher-contract.ts";

export function createPodPublisher(opts: PodPublisherOptions): PodPublisher {
  const { config, logger } = opts;
  const timing = { ...DEFAULT_TIMING, ...opts.timing };
  const random = opts.random ?? Math.random;
  const now = opts.monotonicNow ?? (() => performance.now());
  const wallClock = opts.wallClock ?? (() => new Date());
  const stopping = new AbortController();
  const api = createPodApi({
    kubeConfig: opts.kubeConfig,
    namespace: config.namespace,
    podName: config.podName,
    requestTimeoutMs: timing.requestTimeoutMs,
    stopSignal: stopping.signal,
  });
  const events = createEventRecorder({
    api,
    namespace: config.namespace,
    podName: config.podName,
    logger,
    lastSeenPod: () => pod,
    attempts: timing.eventAttempts,
    backoff: timing.backoff,
    random,
    wallClock,
    stopSignal: stopping.signal,
  });
  const tracker = createPublishTracker(now);

  let desired: { state: LeadershipState; pod: DesiredPod; generation: number } | null = null;
  let pod: V1Pod | undefined;
  let podStale = true;
  let peerSelector: string | null | undefined = config.peerSelector ?? undefined;
  let peersClearedFor: string | null = null;
  let lastError: string | undefined;
  let dirty = false;
  let wakeLoop: (() => void) | null = null;
  let backoffCut = new AbortController();
  let loop: Promise<void> | null = null;
  let stopWatch: (() => void) | null = null;
  let resyncTimer: NodeJS.Timeout | null = null;
  let startResult: Promise<StartResult> | null = null;
  let stopped: Promise<void> | null = null;

  const shows = () => desired !== null && podShows(desired.pod, pod);

  function wake(): void {
    dirty = true;
    wakeLoop?.();
  }

  function seen(next: V1Pod): void {
    pod = next;
    if (desired) {
      if (shows()) {
        const reported = tracker.shown(desired.state.role);
        if (reported)
          opts.onPublished?.({ role: desired.state.role, fence: desired.state.fence, ...reported });
      } else {
        wake();
      }
    }
    tracker.notify();
  }

  async function patch<T>(target: PatchObservation["target"], run: () => Promise<T>): Promise<T> {
    const started = now();
    try {
      const result = await run();
      opts.onPatch?.({ target, ok: true, durationMs: now() - started });
      return result;
    } catch (error) {
      const status = error instanceof KubeRequestError ? error.status : undefined;
      opts.onPatch?.({ target, ok: false, durationMs: now() - started, ...(status ? { status } : {}) });
      throw error;
    }
  }

  function resolvePeerSelector(own: V1Pod): void {
    if (peerSelector !== undefined) return;
    peerSelector = defaultPeerSelector(own.metadata?.labels);
    if (peerSelector === null) {
      logger.warn(
        "peers cannot be found: no peer selector configured and this pod has neither an app.kubernetes.io/name nor an app.kubernetes.io/instance label; a stale leader label left on another pod will not be cleared",
      );
    }
  }

  /** One pass towards the newest desired state; returns early when a newer one arrives. */
  async function reconcile(): Promise<void> {
    const target = desired;
    if (!target) return;
    const superseded = () => desired?.generation !== target.generation || stopping.signal.aborted;
    if (podStale || !pod) {
      podStale = false;
      seen(await api.readPod());
    }
    if (pod) resolvePeerSelector(pod);
    const term = `${target.state.lease}#${target.state.fence}`;
    if (target.state.role === "leader" && peersClearedFor !== term && peerSelector) {
      const demoted = await demoteStalePeers({
        api,
        config,
        peerSelector,
        lease: target.state.lease,
        wallClock,
        observe: (run) => patch("peer", run),
      });
      if (demoted.length > 0) logger.warn({ pods: demoted }, "took a stale leader label off other pods");
      peersClearedFor = term;
    }
    if (superseded()) return;
    const labels = metadataPatch(target.pod, pod);
    if (labels) seen(await patch("metadata", () => api.patchMetadata(config.podName, labels)));
    if (superseded()) return;
    const condition = conditionPatch(target.pod, pod, wallClock());
    if (condition) seen(await patch("status", () => api.patchStatus(config.podName, condition)));
    // Without this a server that answers patches but never reflects them would spin the loop.
    if (!superseded() && !shows()) throw new Error("the pod does not show the patched state");
  }

  async function run(): Promise<void> {
    let failures = 0;
    let lastLogged = "";
    while (!stopping.signal.aborted) {
      if (!dirty) await new Promise<void>((resolve) => (wakeLoop = resolve));
      wakeLoop = null;
      if (stopping.signal.aborted) return;
      dirty = false;
      try {
        await reconcile();
        if (failures > 0) logger.info({ failures }, "pod publishing recovered");
        failures = 0;
        lastLogged = "";
        lastError = undefined;
      } catch (error) {
        if (stopping.signal.aborted) return;
        failures++;
        lastError = error instanceof Error ? error.message : String(error);
        const repeated = lastError === lastLogged && failures % 20 !== 0;
        if (!repeated) logFailure(error, failures);
        lastLogged = lastError;
        if (error instanceof KubeRequestError && (error.kind === "conflict" || error.kind === "not-found")) {
          podStale = true;
        }
        dirty = true;
        backoffCut = new AbortController();
        await pause(
          backoffDelay(failures - 1, timing.backoff, random),
          AbortSignal.any([stopping.signal, backoffCut.signal]),
        );
      }
    }
  }

  function logFailure(error: unknown, failures: number): void {
    if (!(error instanceof KubeRequestError)) {
      logger.error({ err: error, failures }, "pod publishing failed unexpectedly; retrying");
    } else if (error.kind === "forbidden") {
      logger.error(
        { failures, permission: permissionName(error.permission) },
        `missing permission: ${permissionName(error.permission)} in namespace ${config.namespace}; grant it in the Role bound to this pod's service account (retrying)`,
      );
    } else if (error.kind === "conflict") {
      logger.debug({ failures }, "pod changed under a patch (409); re-reading and retrying");
    } else {
      logger.warn({ failures, err: error.message }, "pod publishing failed; retrying with backoff");
    }
  }

  function setDesired(state: LeadershipState): void {
    if (stopping.signal.aborted) return;
    try {
      const previous = desired?.state;
      if (
        previous &&
        previous.lease === state.lease &&
        previous.role === state.role &&
        previous.fence === state.fence &&
        previous.holder === state.holder
      ) {
        return;
      }
      const next = { ...state };
      desired = { state: next, pod: desiredPod(next, config), generation: (desired?.generation ?? 0) + 1 };
      if (previous?.role !== next.role) {
        tracker.roleChanged(next.role);
        // A role change is when the pod matters most: try it now, not at the end of a backoff.
        backoffCut.abort();
      }
      if (next.role === "follower") peersClearedFor = null;
      for (const e of leadershipTransitions(previous, next, config.podName))
        events.record(e.reason, e.message);
      if (shows()) seen(pod as V1Pod);
      wake();
      tracker.notify();
    } catch (error) {
      logger.error({ err: error }, "could not record the desired pod state");
    }
  }

  function startBackground(): void {
    loop = run();
    stopWatch = watchOwnPod({
      kubeConfig: opts.kubeConfig,
      namespace: config.namespace,
      podName: config.podName,
      logger,
      backoff: timing.backoff,
      random,
      onPod: (next) => {
        if (!isOlder(next, pod)) seen(next);
      },
      onDeleted: () => {
        logger.warn("this pod was deleted; publishing continues until the process stops");
        pod = undefined;
        podStale = true;
      },
      onReconnect: () => {
        podStale = true;
        wake();
      },
    }).stop;
    resyncTimer = setInterval(() => {
      podStale = true;
      wake();
    }, config.resyncIntervalMs);
    resyncTimer.unref();
  }

  return {
    start(initial) {
      startResult ??= (async () => {
        startBackground();
        setDesired(initial);
        const publishing = tracker.waitFor(
          () => (shows() ? true : null),
          timing.startTimeoutMs,
          stopping.signal,
        );
        const missingPermissions = await checkPermissions(api, config.namespace, logger);
        // A missing permission is the answer: no need to wait for a publish it may forbid.
        if (missingPermissions.length > 0) return { published: shows(), missingPermissions };
        const published = await publishing;
        if (!published) {
          logger.warn(
            { lastError, timeoutMs: timing.startTimeoutMs },
            "the pod did not show the initial state in time; publishing continues in the background",
          );
        }
        return { published, missingPermissions };
      })();
      return startResult;
    },
    setDesired,
    async demote(timeoutMs) {
      if (!desired) return false;
      setDesired({ ...desired.state, role: "follower", fence: null });
      return tracker.waitFor(
        () => (desired?.state.role !== "follower" ? false : shows() || null),
        timeoutMs,
        stopping.signal,
      );
    },
    state() {
      return { published: shows(), ...(lastError === undefined ? {} : { lastError }) };
    },
    stop() {
      stopped ??= (async () => {
        stopWatch?.();
        if (resyncTimer) clearInterval(resyncTimer);
        // Give the last events (a LeadershipLost at shutdown) one bounded chance to be sent.
        const grace = new AbortController();
        await Promise.race([events.flushed(), pause(timing.requestTimeoutMs, grace.signal)]);
        grace.abort();
        stopping.abort();
        wakeLoop?.();
        tracker.notify();
        await loop;
        await events.flushed();
      })();
      return stopped;
    },
  };
}

/**
 * A watch event can arrive after a patch response that already showed a newer pod. Resource
 * versions are opaque by contract, but every API server in practice issues increasing integers;
 * when both are, the older one is dropped instead of undoing what the patch response showed.
 */
function isOlder(incoming: V1Pod, current: V1Pod | undefined): boolean {
  const a = incoming.metadata?.resourceVersion;
  const b = current?.metadata?.resourceVersion;
  if (!a || !b || !/^\d+$/.test(a) || !/^\d+$/.test(b)) return false;
  return BigInt(a) < BigInt(b);
}
