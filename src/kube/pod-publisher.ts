// Publishes the elector's state onto its own pod, level-triggered: one worker loop runs the
// reconcile step (reconcile.ts) on the state record (publisher-state.ts) until the pod shows the
// newest desired state. The elector never waits on it: setDesired() records the state and returns.
// It publishes to one pod, the uid it pins (POD_UID, else the pod as first read): a pod deleted and
// created again under the same name (a force-deleted StatefulSet pod's next incarnation) is another
// pod with its own sidecar, and this process must never write to it (see #isOwn).
import { type Clock, monotonicClock, type Timer } from "../shared/clock.ts";
import { pause, repeat } from "./backoff.ts";
import type { Pod } from "./client/api-types.ts";
import { createKubeClient, type KubeClient } from "./client/connection.ts";
import type { LeadershipState } from "./desired-state.ts";
import { createEventRecorder, type EventRecorder, leadershipTransitions } from "./leadership-events.ts";
import { type PeerView, startPeerView } from "./peer-view.ts";
import { checkPermissions } from "./permission-check.ts";
import { createPodApi, KubeRequestError, type PodApi } from "./pod-api.ts";
import { type PodWatch, watchOwnPod } from "./pod-watch.ts";
import { defaultPeerSelector, peerSelectorFor } from "./publish-config.ts";
import { failureLog } from "./publish-failures.ts";
import { createPublishTracker, observePatch, type PublishTracker } from "./publish-tracker.ts";
import {
  DEFAULT_TIMING,
  type PodPublisher,
  type PodPublisherOptions,
  type PublishTiming,
  type StartResult,
} from "./publisher-contract.ts";
import { initialState, isOlder, podShowsDesired, recordDesired } from "./publisher-state.ts";
import { type ReconcileContext, reconcile } from "./reconcile.ts";
import { createWorkLoop, type WorkLoop } from "./work-loop.ts";

export function createPodPublisher(opts: PodPublisherOptions): PodPublisher {
  return new KubePodPublisher(opts);
}

class KubePodPublisher implements PodPublisher {
  readonly #opts: PodPublisherOptions;
  readonly #timing: PublishTiming;
  readonly #clock: Clock;
  readonly #random: () => number;
  readonly #wallClock: () => Date;
  readonly #stopping = new AbortController();
  readonly #state: ReturnType<typeof initialState>;
  readonly #client: KubeClient;
  readonly #api: PodApi;
  readonly #events: EventRecorder;
  readonly #tracker: PublishTracker;
  readonly #loop: WorkLoop;
  #running: { loop: Promise<void>; stopWatch: () => Promise<void>; resync: Timer } | null = null;
  /** Watches the peers once their selector is known (demotion on): the handover reads them here. */
  #peerView: PeerView | null = null;
  #starting: Promise<StartResult> | null = null;
  #stopped: Promise<void> | null = null;
  /** stop() has begun: the events no longer wait for the pod (see createEventRecorder's published). */
  #stopRequested = false;

  constructor(opts: PodPublisherOptions) {
    const { config, logger } = opts;
    this.#opts = opts;
    this.#timing = { ...DEFAULT_TIMING, ...opts.timing };
    this.#clock = opts.clock ?? monotonicClock;
    this.#random = opts.random ?? Math.random;
    this.#wallClock = opts.wallClock ?? (() => new Date());
    this.#state = initialState(config.podUid);
    this.#client = createKubeClient(opts.connection);
    this.#api = createPodApi({
      client: this.#client,
      namespace: config.namespace,
      podName: config.podName,
      requestTimeoutMs: this.#timing.requestTimeoutMs,
      clock: this.#clock,
      stopSignal: this.#stopping.signal,
    });
    this.#events = createEventRecorder({
      api: this.#api,
      namespace: config.namespace,
      podName: config.podName,
      logger,
      podUid: () => this.#state.uid ?? undefined,
      attempts: this.#timing.eventAttempts,
      backoff: this.#timing.backoff,
      random: this.#random,
      clock: this.#clock,
      wallClock: this.#wallClock,
      stopSignal: this.#stopping.signal,
      // Once stopping, no request of a handover is left to go first, and the pod watch that would
      // show the change is stopped: waiting on would only add a request timeout to the exit.
      published: () =>
        this.#tracker.waitFor(
          () =>
            this.#stopRequested || this.#state.gone !== null || podShowsDesired(this.#state) ? true : null,
          this.#timing.requestTimeoutMs,
          this.#stopping.signal,
        ),
    });
    this.#tracker = createPublishTracker(this.#clock);
    this.#loop = this.#reconcileLoop();
  }

  start(initial: LeadershipState): Promise<StartResult> {
    this.#starting ??= this.#start(initial);
    return this.#starting;
  }

  setDesired(next: LeadershipState): void {
    if (this.#stopping.signal.aborted || this.#state.gone !== null) return;
    try {
      const change = recordDesired(this.#state, next, this.#opts.config);
      if (change === null) return;
      if (change.previous?.role !== next.role) {
        this.#tracker.roleChanged(next.role);
        // A role change is when the pod matters most: try it now, not at the end of a backoff.
        this.#loop.retryNow();
      }
      for (const e of leadershipTransitions(change.previous, next, this.#opts.config.podName)) {
        this.#events.record(e.reason, e.message);
      }
      if (podShowsDesired(this.#state)) this.#seen(this.#state.pod as Pod);
      this.#loop.wake();
      this.#tracker.notify();
    } catch (error) {
      this.#opts.logger.error({ err: error }, "could not record the desired pod state");
    }
  }

  async demote(timeoutMs: number, why?: string): Promise<boolean> {
    const desired = this.#state.desired;
    if (this.#state.held) {
      // The state the hold kept from the pod (setDesired recorded it) is written now.
      this.#state.held = false;
      this.#loop.wake();
    }
    if (!desired) return false;
    this.setDesired({ ...desired.state, role: "follower", fence: null, ...(why ? { why } : {}) });
    let moot = false;
    const demoted = await this.#tracker.waitFor(
      () => {
        // A pod that no longer exists is in no Service: there is nothing to demote (see #gone).
        if (this.#state.gone !== null) return false;
        if (this.#state.desired?.state.role !== "follower") return false;
        if (podShowsDesired(this.#state)) return true;
        moot = this.#demotionMoot();
        return moot ? false : null;
      },
      timeoutMs,
      this.#stopping.signal,
    );
    if (moot) {
      this.#opts.logger.warn(
        { lastError: this.#state.lastError },
        "this pod is being deleted and the API server refuses its demotion: releasing the lease without it (a pod being deleted is out of its Services' ready endpoints already)",
      );
    }
    return demoted;
  }

  holdOwnWrites(): void {
    this.#state.held = true;
  }

  async endHold(timeoutMs: number): Promise<boolean> {
    if (!this.#state.held) return this.demote(timeoutMs);
    const since = this.#clock.now();
    // Called once the release is done, before the new leader's demotion of this pod (its claim,
    // its list, then its patches): a write of its own now would queue beside that demotion, on
    // the new leader's way to its label.
    // Half the budget at most, so a demotion of its own still has time to be tried: a new leader
    // refused by the API server (`helm uninstall` deleted the RBAC) never demotes this pod.
    // The peers are looked at again as they change: in a `helm uninstall` the other pods' deletions
    // come moments after this one's, often after this wait began.
    const { roleLabel, leaderValue } = this.#opts.config;
    const demotedByPeer = await this.#tracker.waitFor(
      () => {
        if (this.#state.gone !== null) return true;
        if (this.#state.pod?.metadata?.labels?.[roleLabel] !== leaderValue) return true;
        return this.#successorPossible() ? null : false;
      },
      timeoutMs / 2,
      this.#stopping.signal,
    );
    if (demotedByPeer) return true;
    return this.demote(Math.max(0, timeoutMs - (this.#clock.now() - since)));
  }

  /**
   * Whether another pod may take the lease and demote this one: a peer not being deleted, or peers
   * not known (no healthy peer view). Without one (one replica, `helm uninstall`) nobody will.
   */
  #successorPossible(): boolean {
    const peers = this.#peerView?.peers();
    if (!peers) return true;
    return peers.some((peer) => !peer.metadata?.deletionTimestamp);
  }

  /**
   * Waiting for the demotion would route nothing and keep the lease from a follower: this pod is
   * being deleted, so the EndpointSlice controller has taken it out of every Service's ready
   * endpoints, and the API server refuses the demotion for good (401/403: `helm uninstall`
   * deleted the ServiceAccount or its RBAC while the pods stop). A new leader that can label
   * itself can also patch pods, and with peer demotion it takes this pod's leader label off
   * before it labels itself. A refusal while the pod is not being deleted (its sidecar restarted
   * in place, RBAC removed by hand) keeps the wait: that pod is still routable. So does one
   * without peer demotion, or across clusters: no new leader takes this label off, and a refusal
   * may be transient (an authorizer's hiccup), so the demotion must still come first.
   */
  #demotionMoot(): boolean {
    const { demotePeers, clusterName } = this.#opts.config;
    if (!demotePeers || clusterName !== null) return false;
    return this.#state.accessRefused && Boolean(this.#state.pod?.metadata?.deletionTimestamp);
  }

  state(): { published: boolean; lastError?: string } {
    const lastError = this.#state.gone ?? this.#state.lastError;
    return { published: podShowsDesired(this.#state), ...(lastError === undefined ? {} : { lastError }) };
  }

  async listPeers(): Promise<Pod[]> {
    const pod = this.#state.pod ?? (await this.#api.listOwnPod()).items[0];
    // Also with peer demotion off: the health gate still looks for candidates among the peers.
    const selector = this.#opts.config.peerSelector ?? defaultPeerSelector(pod?.metadata?.labels);
    if (selector === null) return [];
    const peers = (await this.#api.listSelected(selector)).items;
    return peers.filter((peer) => peer.metadata?.name !== this.#opts.config.podName);
  }

  stop(): Promise<void> {
    this.#stopped ??= (async () => {
      this.#stopRequested = true;
      this.#tracker.notify();
      this.#running?.resync.cancel();
      const watchStopped = Promise.all([this.#running?.stopWatch(), this.#peerView?.stop()]);
      // Give the last events (a LeadershipLost at shutdown) one bounded chance to be sent.
      const grace = new AbortController();
      await Promise.race([
        this.#events.flushed(),
        pause(this.#clock, this.#timing.requestTimeoutMs, grace.signal),
      ]);
      grace.abort();
      this.#stopping.abort();
      this.#tracker.notify();
      await this.#running?.loop;
      await this.#events.flushed();
      await watchStopped;
      this.#client.close();
    })();
    return this.#stopped;
  }

  async #start(initial: LeadershipState): Promise<StartResult> {
    const { config, logger } = this.#opts;
    this.#startBackground();
    this.setDesired(initial);
    const publishing = this.#tracker.waitFor(
      () => (this.#state.gone !== null ? false : podShowsDesired(this.#state) ? true : null),
      this.#timing.startTimeoutMs,
      this.#stopping.signal,
    );
    const missingPermissions = await checkPermissions(this.#api, config.namespace, logger);
    // A missing permission is the answer: no need to wait for a publish it may forbid.
    if (missingPermissions.length > 0) return { published: podShowsDesired(this.#state), missingPermissions };
    const published = await publishing;
    // Known once the pod was read; a pod not read yet is checked when it first leads.
    if (this.#state.pod) {
      try {
        peerSelectorFor(config, this.#state.pod.metadata?.labels);
      } catch (error) {
        await this.stop();
        throw error;
      }
    }
    if (!published) {
      logger.warn(
        { lastError: this.#state.lastError, timeoutMs: this.#timing.startTimeoutMs },
        "the pod did not show the initial state in time; publishing continues in the background",
      );
    }
    return { published, missingPermissions };
  }

  /** The worker that runs the reconcile step on the state record until the pod shows it. */
  #reconcileLoop(): WorkLoop {
    const { config, logger } = this.#opts;
    const context: ReconcileContext = {
      api: this.#api,
      config,
      logger,
      wallClock: this.#wallClock,
      stopSignal: this.#stopping.signal,
      stillLeads: this.#opts.stillLeads ?? (() => true),
      renewals: this.#opts.renewals ?? (() => null),
      seen: (pod) => this.#seen(pod),
      gone: (why) => this.#gone(why),
      peers: (selector) => (this.#peerView?.selector === selector ? this.#peerView.peers() : null),
      peerSeen: (pod) => this.#peerView?.seen(pod),
      observe: (target, run) => observePatch(this.#clock, target, run, this.#opts.onPatch),
    };
    const failures = failureLog(logger, config);
    return createWorkLoop({
      clock: this.#clock,
      backoff: this.#timing.backoff,
      random: this.#random,
      stopSignal: this.#stopping.signal,
      step: () => reconcile(this.#state, context),
      onSuccess: (failed) => {
        failures.recovered(failed);
        this.#state.lastError = undefined;
        this.#state.accessRefused = false;
      },
      onFailure: (error, failed) => {
        this.#state.lastError = failures.failed(error, failed);
        // A pinned patch refused by another pod of this name: the next read finds this one gone.
        if (
          error instanceof KubeRequestError &&
          (error.kind === "conflict" || error.kind === "not-found" || error.kind === "another-pod")
        ) {
          this.#state.podStale = true;
        }
        this.#state.accessRefused =
          error instanceof KubeRequestError && (error.status === 401 || error.status === 403);
        // A demotion waiting on the pod may now be moot (see #demotionMoot).
        this.#tracker.notify();
      },
    });
  }

  #seen(next: Pod): void {
    // A patch's answer can arrive after the watch brought a later write (the kubelet's): the
    // older version would undo it, e.g. show the health gate a ready application again.
    if (!this.#isOwn(next) || isOlder(next, this.#state.pod)) return;
    this.#state.pod = next;
    if (!this.#peerView) this.#watchPeers(next);
    this.#opts.onPod?.(next);
    const desired = this.#state.desired;
    if (desired && podShowsDesired(this.#state)) {
      const reported = this.#tracker.shown(desired.state.role);
      if (reported) {
        this.#opts.onPublished?.({ role: desired.state.role, fence: desired.state.fence, ...reported });
      }
    } else if (desired) {
      this.#loop.wake();
    }
    this.#tracker.notify();
  }

  /**
   * Whether `pod` is this process's pod: the uid pinned, or, with none yet (no POD_UID), the first
   * pod read, whose uid is pinned from then on. A pod of the name with another uid means this
   * process's pod was deleted and the name reused: it is gone.
   */
  #isOwn(pod: Pod): boolean {
    if (this.#state.gone !== null) return false;
    const uid = pod.metadata?.uid;
    if (this.#state.uid === null) {
      if (uid) {
        this.#state.uid = uid;
        this.#opts.logger.debug({ uid }, "POD_UID not set: publishing to the pod with the uid first read");
      }
      return true;
    }
    if (uid === this.#state.uid) return true;
    this.#gone(
      `pod ${this.#opts.config.podName} is another pod now (uid ${uid}, this process's was ${this.#state.uid})`,
    );
    return false;
  }

  /**
   * This process's pod is gone for good (a force delete leaves the process running on a node the
   * API server cannot reach). It publishes nothing more: any label it wrote would land on no pod or
   * on the next pod of its name, whose own sidecar publishes that pod's state. It keeps its lease:
   * its application may still run and lead with the fence, and the next term must not begin before
   * this one ends (the process stops, or the lease expires). No Service routes to a pod that is gone.
   */
  #gone(why: string): void {
    if (this.#state.gone !== null) return;
    this.#state.gone = why;
    this.#state.pod = undefined;
    this.#opts.logger.error(
      { uid: this.#state.uid },
      `${why}: this process publishes nothing more (no label, annotation, condition, event or peer demotion); it keeps its lease until it stops or loses it`,
    );
    this.#tracker.notify();
  }

  /** Starts the peer view once the pod's labels give the peer selector (peer demotion on). */
  #watchPeers(pod: Pod): void {
    const { config, logger } = this.#opts;
    // Once stop() has begun it stops only the view it found then.
    if (this.#stopped !== null) return;
    let selector: string | null;
    try {
      selector = peerSelectorFor(config, pod.metadata?.labels);
    } catch {
      return; // start() and the first leading pass say why
    }
    if (selector === null) return;
    this.#peerView = startPeerView({
      ...this.#watchTiming(),
      logger: logger.child({ watch: "peers" }),
      selector,
      podName: config.podName,
      list: () => this.#api.listSelected(selector),
      // A peer labelled leader by an older term while this pod leads: the next pass demotes it.
      onChange: () => {
        if (this.#state.desired?.state.role === "leader") this.#loop.wake();
        // A hold waiting for a new leader ends once none can come (endHold).
        this.#tracker.notify();
        const peers = this.#peerView?.peers();
        if (peers) this.#opts.onPeers?.(peers);
      },
    });
  }

  #watchTiming() {
    return {
      client: this.#client,
      namespace: this.#opts.config.namespace,
      backoff: this.#timing.backoff,
      openTimeoutMs: this.#timing.requestTimeoutMs,
      random: this.#random,
      clock: this.#clock,
    };
  }

  #startBackground(): void {
    const { config, logger } = this.#opts;
    const watch: PodWatch = watchOwnPod({
      ...this.#watchTiming(),
      list: () => this.#api.listOwnPod(),
      podName: config.podName,
      logger,
      onPod: (next) => this.#seen(next),
      onDeleted: (pod) => {
        const uid = pod?.metadata?.uid;
        // The end of a later pod of this name says nothing about this one.
        if (uid !== undefined && this.#state.uid !== null && uid !== this.#state.uid) return;
        if (this.#state.uid !== null) {
          this.#gone(`pod ${config.podName} (uid ${this.#state.uid}) was deleted`);
          return;
        }
        this.#state.pod = undefined;
        this.#state.podStale = true;
      },
    });
    // A streaming watch sees every change, and resumes without a gap after it ends: the pod is
    // re-read on a timer only while watches fail (RBAC without watch, a server refusing it).
    const resync = () => {
      if (watch.healthy()) return;
      this.#state.podStale = true;
      this.#loop.wake();
    };
    this.#running = {
      loop: this.#loop.run(),
      stopWatch: watch.stop,
      resync: repeat(this.#clock, config.resyncIntervalMs, resync),
    };
  }
}
