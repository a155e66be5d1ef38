// `pglease run`: the lease stack from the composition root (src/leases/open-leases.ts), and on top of it
// what only the sidecar has: the pod publisher, metrics, logs and the HTTP endpoints. The HTTP
// server comes up first, so probes answer "starting" while PostgreSQL is waited for.
import type { Server } from "node:http";
import type { RunConfig } from "../config/run-config.ts";
import { WitnessedCrashes } from "../election/crash-witness.ts";
import type { Elector, TickReport } from "../election/elector.ts";
import { holderIdentity, RESTART_PROOF_MARKER } from "../election/identity.ts";
import { holdersReportedDead, writeTerminationMessage } from "../kube/crash-report.ts";
import type { PodPublisher } from "../kube/publisher-contract.ts";
import { type Leases, type OpenLeasesOptions, openLeasesWith } from "../leases/open-leases.ts";
import { packageVersion } from "../observability/build-info.ts";
import { leaseLogger } from "../observability/logger.ts";
import { SidecarMetrics } from "../observability/metrics.ts";
import { type TransitionFields, transitionFields } from "../observability/transition-log.ts";
import type { Logger } from "../shared/logger.ts";
import { type AppHealth, startAppHealth } from "./app-health.ts";
import { startHttpServer } from "./http-server.ts";
import { startPublisher } from "./publishing.ts";
import { SidecarView, stallBound } from "./sidecar-view.ts";

export interface Sidecar {
  holder: string;
  electors: readonly Elector[];
  httpPort: number;
  /**
   * Graceful stop: work, then demote and release (in parallel when the new leader fences this pod
   * off, see campaign()), close. Idempotent.
   */
  stop(): Promise<void>;
}

export interface SidecarDeps {
  config: RunConfig;
  logger: Logger;
  /** Aborts a start-up still waiting for PostgreSQL (a SIGTERM before the pod ever ran). */
  signal?: AbortSignal;
}

export async function startSidecar({ config, logger, signal }: SidecarDeps): Promise<Sidecar> {
  // Until the lease stack opens: it appends the restart proof when this process holds the lock.
  let holder = holderIdentity(config.pod.name, config.clusterName);
  let log = logger.child({ holder });
  const metrics = new SidecarMetrics({ version: await packageVersion() }, config.leases);
  const view = new SidecarView({ candidacyWaitMs: config.timing.leaseDurationMs });
  let health: AppHealth | null = null;
  const http = await serveHttp(config, { holder: () => holder, view, metrics, appHealth: () => health });
  // Only once the port is ours: a failed start must leave no probe timer keeping the process up.
  const appHealth = startAppHealth(
    config.health,
    logger.child({ component: "health" }),
    () => view.leadsAny(),
    { annotation: config.publish.leaseAnnotation, name: config.publishLease },
  );
  health = appHealth;
  if (appHealth) metrics.watchHealth(config.health.source, () => appHealth.gate.view());
  const closeHttp = () => closeServer(http.server);
  let leases: Leases | null = null;
  let publisher: PodPublisher | null = null;
  // The pod as its own watch (or a patch's answer) shows it: marked for deletion yet? See onDeletion.
  let deleting = false;
  let onDeletion = () => {};
  try {
    // Through a getter: the lease stack's later warnings carry the identity it settled on.
    const crashes = config.crashTakeover.enabled ? new WitnessedCrashes() : null;
    leases = await openLeasesWith(
      leaseOptions(config, holder, () => log, signal),
      {
        ...(crashes ? { crashWitness: crashes } : {}),
        onAnnounced: (answer) => view.announced(answer),
        // The sidecar is `pglease run`, whose process cmd/pglease.ts starts: never a worker thread.
        onMainThread: true,
      },
    );
    holder = leases.holder;
    // holder is this process on every line; a transition names who holds after it heldBy.
    log = logger.child({ holder });
    // Before the first claim: a term of this process must be one the kubelet's report can name.
    if (crashes) await announceForCrashReports(config, holder, log);
    view.opened(config.publishing.enabled);
    publisher = await startPublisher({
      config,
      log,
      metrics,
      onShown: () => view.podShown(),
      stillLeads: (term) => view.stillLeads(term),
      onPod: (pod) => {
        appHealth?.onPod(pod);
        if (!pod.metadata?.deletionTimestamp || deleting) return;
        deleting = true;
        onDeletion();
      },
      renewals: (term) => view.renewals(term),
      ...(crashes
        ? {
            onPeers: (peers) => {
              for (const peer of peers) {
                for (const dead of holdersReportedDead(
                  peer,
                  config.clusterName,
                  config.health.sidecarContainer,
                )) {
                  if (crashes.add(dead)) {
                    log.info(
                      { pod: peer.metadata?.name, dead },
                      `the kubelet reported holder ${dead} terminated: claiming the leases it holds`,
                    );
                  }
                }
              }
            },
          }
        : {}),
    });
    appHealth?.usePublisher(publisher);
  } catch (error) {
    appHealth?.stop();
    await leases?.close();
    await closeHttp();
    throw error;
  }
  leases.releases?.subscribe((key) => metrics.observeNotice(key));
  const shutdown: Shutdown = {
    started: false,
    demotion: null,
    ownWritesDeferred: false,
    resumeOwnWrites: null,
  };
  const electors = campaign({ config, log, leases, publisher, appHealth, shutdown, metrics, view });
  log.info(
    { leases: config.leases, http: `${config.http.host}:${http.port}`, notify: leases.notify },
    `campaigning for ${config.leases.join(", ")} as ${holder}`,
  );
  const opened = leases;
  // Stops every campaign and releases what it leads (demotion as beforeRelease says): the first half
  // of a stop, begun by whichever comes first, the pod's deletion or the SIGTERM.
  let campaignEnd: Promise<void> | null = null;
  const endCampaigns = () => {
    shutdown.started = true;
    view.campaignEnded();
    campaignEnd ??= opened.close();
    return campaignEnd;
  };
  // The EndpointSlice controller takes a pod marked for deletion out of its Services at once, while
  // the kubelet's SIGTERM comes later (after the application's containers, for a native sidecar):
  // hand over now, so a follower leads before the SIGTERM. The process stays up, publishing the
  // follower role, until that SIGTERM; a pod marked for deletion never campaigns again.
  onDeletion = () => {
    if (campaignEnd !== null) return;
    // Before the release, so no demotion of this pod's own is sent beside it (see Shutdown).
    if (publisher && newLeaderFencesOff(config)) {
      shutdown.ownWritesDeferred = true;
      publisher.holdOwnWrites();
    }
    log.info(
      { leases: config.leases },
      `pod ${config.pod.name} is being deleted: handing over now, not campaigning again (the SIGTERM then stops the process)`,
    );
    // stop() awaits the same promise and reports a failure; here it must not go unhandled. The
    // hold's bound runs from the release, not from the SIGTERM: a preStop hook can hold that back
    // for minutes, and a pod that released its lease must not say `leader` all that time when no
    // new leader takes the label off (none eligible, none left).
    endCampaigns()
      .catch(() => {})
      .then(endHold);
  };
  // Once, whichever comes first after the release: the deletion's path or the SIGTERM's.
  const endHold = () => {
    if (!shutdown.ownWritesDeferred) return;
    shutdown.ownWritesDeferred = false;
    shutdown.demotion = shutdown.resumeOwnWrites?.() ?? null;
  };
  if (deleting) onDeletion();
  let stopping: Promise<void> | null = null;
  return {
    holder,
    electors,
    httpPort: http.port,
    stop() {
      shutdown.started = true;
      stopping ??= (async () => {
        await endCampaigns();
        // The pod is demoted by the new leader, or by this process if none does within the budget
        // (none was ready) or none can (no other pod: one replica, uninstall).
        endHold();
        // A demotion sent beside the release (or after a hold) gets its bounded chance to land.
        await shutdown.demotion?.catch(() => {});
        await publisher?.stop().catch(() => {});
        // After the publisher: a last pod event must not re-arm the gate's timers.
        appHealth?.stop();
        await closeHttp();
        log.info("stopped");
      })();
      return stopping;
    },
  };
}

/**
 * Crash takeover, the holder's side: its identity in the termination message file, which the
 * kubelet shows in this container's status once its process has exited. Without a restart proof
 * the identity could be a later process's too, so nothing is written and nobody takes over early.
 */
async function announceForCrashReports(config: RunConfig, holder: string, log: Logger): Promise<void> {
  if (!holder.includes(RESTART_PROOF_MARKER)) {
    log.warn(
      "--crash-takeover: this process has no restart lock (see the line above), so no kubelet report can name it: a crash of it is replaced at the lease expiry",
    );
    return;
  }
  await writeTerminationMessage(config.crashTakeover.messagePath, holder).catch((error: Error) =>
    log.warn(
      { err: error.message, path: config.crashTakeover.messagePath },
      "--crash-takeover: could not write the termination message (set --termination-message-path to the container's terminationMessagePath): a crash of this process is replaced at the lease expiry",
    ),
  );
  if (!config.publish.peerDemotion) {
    log.warn(
      "--crash-takeover needs the peer view of --peer-demotion to follow: this process waits for expiries as a follower",
    );
  }
}

function leaseOptions(
  config: RunConfig,
  holder: string,
  log: () => Logger,
  signal: AbortSignal | undefined,
): OpenLeasesOptions {
  return {
    connectionString: config.database.connectionString,
    ...(config.database.ssl !== undefined ? { ssl: config.database.ssl } : {}),
    poolSize: config.poolSize,
    schema: config.database.schema,
    table: config.database.table,
    migrate: config.migrate,
    notify: config.notify,
    noticePingIntervalMs: config.timing.leaseDurationMs,
    preparedStatements: config.database.preparedStatements,
    serverTimeouts: config.database.serverTimeouts,
    historyRetention: config.history,
    holder,
    restartTakeover: config.restartTakeover,
    sessionTakeover: config.sessionTakeover,
    // Without POD_NAME the lease stack stands the machine for the pod, and says so.
    ...(config.pod.name ? { pod: { name: config.pod.name, uid: config.pod.uid } } : {}),
    revision: config.pod.revision ?? null,
    // A statement must not outlive the elector's call: the same bound on both sides.
    statementTimeoutMs: config.timing.callTimeoutMs,
    startTimeoutMs: config.startTimeoutMs,
    ...(signal ? { signal } : {}),
    logger: {
      info: (message, fields) => leaseLogger(log()).info(message, fields),
      warn: (message, fields) => leaseLogger(log()).warn(message, fields),
    },
  };
}

function serveHttp(
  config: RunConfig,
  {
    holder,
    view,
    metrics,
    appHealth,
  }: {
    /** Changes once, when the lease stack opens. */
    holder: () => string;
    view: SidecarView;
    metrics: SidecarMetrics;
    /** Null until the gate starts (just after the port is bound), and without a gate. */
    appHealth: () => AppHealth | null;
  },
) {
  const stallAfterMs = stallBound(config.timing);
  return startHttpServer(config.http, {
    health: () => {
      const health = appHealth();
      return health ? { source: config.health.source, ...health.gate.view() } : null;
    },
    electors: () => view.electors(),
    holder,
    cluster: config.clusterName,
    pod:
      config.pod.name && config.pod.namespace
        ? { namespace: config.pod.namespace, name: config.pod.name }
        : null,
    stalled: () => view.stalled(stallAfterMs, performance.now()),
    notReady: async () => view.notReady(performance.now()),
    metrics: async () => ({
      contentType: metrics.registry.contentType,
      body: await metrics.registry.metrics(),
    }),
  });
}

interface Shutdown {
  started: boolean;
  /** The demotion a release did not wait for (see campaign()), settling within its budget. */
  demotion: Promise<unknown> | null;
  /**
   * The pod is being deleted and a new leader fences it off: this process writes nothing to its own
   * pod (no demotion, no holder annotation) until its release is done, then demotes it itself only
   * if no new leader did within the budget (PodPublisher.endHold), SIGTERM or not. The EndpointSlice controller took
   * the pod out of every Service's ready endpoints already, and each write of its own would queue
   * at the API server beside the new leader's demotion of this pod, which the new leader's label
   * waits for (a handover's critical path; issue 30).
   */
  ownWritesDeferred: boolean;
  /** Ends the hold (bounded) once the release is done (PodPublisher.endHold). */
  resumeOwnWrites: (() => Promise<unknown>) | null;
}

/**
 * Whether a new leader takes this pod's leader label off before it labels itself: with peer
 * demotion in one cluster it reads its peers from the API server (a quorum list) and fences off or
 * demotes each. Across clusters the new leader cannot reach these pods; without peer demotion it
 * does not try. The setting is the workload's: every pod of a lease shares it.
 */
function newLeaderFencesOff(config: RunConfig): boolean {
  return config.publish.peerDemotion && config.clusterName === null;
}

/**
 * One elector per lease, each wired to metrics, logs, the health gate and (for the published
 * lease) the pod.
 */
function campaign({
  config,
  log,
  leases,
  publisher,
  appHealth,
  shutdown,
  metrics,
  view,
}: {
  config: RunConfig;
  log: Logger;
  leases: Leases;
  publisher: PodPublisher | null;
  appHealth: AppHealth | null;
  shutdown: Shutdown;
  metrics: SidecarMetrics;
  view: SidecarView;
}): Elector[] {
  const stepBudget = Math.floor(config.gracePeriodMs / 4);
  // Gap, never overlap, kept by the new leader (newLeaderFencesOff): the stopping leader releases
  // at once and demotes its pod in parallel, or, its pod being deleted, leaves the demotion to the
  // new leader (or demotes it itself once the release is done, if none did). Where nobody else takes this pod's label off, the demotion comes first.
  const fencedOffByNext = newLeaderFencesOff(config);
  const since = performance.now();
  const electors = config.leases.map((key) => {
    const published = publisher !== null && key === config.publishLease;
    let self: Elector | undefined;
    const gate = appHealth?.gate.gateFor(() => self?.isLeader() ?? false);
    const elector = leases.campaign(key, {
      ...config.timing,
      ...config.candidacy,
      stopTimeoutMs: stepBudget,
      // A health handover demotes the pod as a shutdown does.
      ...(published
        ? {
            beforeRelease: async ({ reason }) => {
              if (shutdown.ownWritesDeferred) return;
              const demoted = publisher.demote(stepBudget, reason);
              if (!fencedOffByNext) return demoted;
              shutdown.demotion = demoted;
            },
          }
        : {}),
      ...(gate ? { campaign: gate } : {}),
    });
    self = elector;
    // Listeners go on before the first tick, which runs on a timer after campaign() returns.
    observe(elector, log, metrics, view);
    if (published) {
      elector.on("tick", (tick) => view.countRenewal(tick));
      const publish = () => {
        const s = elector.status();
        // Once shutting down (the pod is being demoted), nothing may label it leader again.
        if (shutdown.started && s.role === "leader") return;
        const { key: lease, role, fence, leader, notCampaigning } = s;
        publisher.setDesired({ lease, role, fence, holder: leader ?? "", notCampaigning });
      };
      elector.on("transition", publish);
      // Peers read it: an unready leader hands over only to a pod that campaigns.
      gate?.subscribe(publish);
      // A follower's holder annotation follows the leader it sees, even without a transition.
      elector.on("leader-changed", publish);
      shutdown.resumeOwnWrites = () => publisher.endHold(stepBudget);
    }
    return elector;
  });
  view.campaigning(electors, since);
  return electors;
}

function observe(elector: Elector, log: Logger, metrics: SidecarMetrics, view: SidecarView): void {
  metrics.watch(elector);
  elector.on("tick", (tick) => {
    view.ticked(tick.key, performance.now());
    log.debug(
      { lease: tick.key, outcome: tick.outcome, action: tick.action, durationMs: tick.durationMs },
      tick.sentence,
    );
  });
  const fields = transitionFields(elector.holder);
  elector.on("transition", (tick) => logTransition(log, fields(tick), tick));
  elector.on("work-error", (error) =>
    log.error({ lease: elector.key, err: String(error) }, "leader work failed"),
  );
}

const WARNING_OUTCOMES = new Set<TickReport["outcome"]>([
  "transient-error",
  "lost",
  "stepped-down",
  "refused",
]);

function logTransition(log: Logger, fields: TransitionFields, tick: TickReport): void {
  if (WARNING_OUTCOMES.has(tick.outcome)) {
    log.warn(fields, tick.sentence);
  } else {
    log.info(fields, tick.sentence);
  }
}

function closeServer(server: Server): Promise<void> {
  return new Promise((resolve) => {
    server.close(() => resolve());
    server.closeAllConnections();
  });
}
