// `pglease run`: the one place where the lease store, the elector, the pod publisher, the
// metrics and the HTTP endpoints are wired together.
import { setTimeout as sleep } from "node:timers/promises";
import type pg from "pg";
import type { Logger } from "pino";
import type { RunConfig } from "../config/run-config.ts";
import { Elector, type TickReport } from "../election/elector.ts";
import { holderIdentity } from "../election/identity.ts";
import { decidePublishing } from "../kube/environment.ts";
import { validatePublishConfig } from "../kube/publish-config.ts";
import type { PodPublisher } from "../kube/publisher-contract.ts";
import { BatchedRenewals } from "../lease/batched-renewals.ts";
import { isUnreachable } from "../lease/connection-errors.ts";
import { assertTablePresent, migrate } from "../lease/migrate.ts";
import { asynchronousCommit, createLeasePool } from "../lease/pool.ts";
import { PgReleaseFeed } from "../lease/release-feed.ts";
import { PgLeaseStore } from "../lease/store.ts";
import { startHttpServer } from "./http-server.ts";
import { ControllerMetrics } from "./metrics.ts";

export interface Controller {
  holder: string;
  electors: readonly Elector[];
  httpPort: number;
  /** Graceful stop: work, demote, release, close. Idempotent. */
  stop(): Promise<void>;
}

export interface ControllerDeps {
  config: RunConfig;
  logger: Logger;
  env: NodeJS.ProcessEnv;
  /** Aborts a start-up still waiting for PostgreSQL (a SIGTERM before the pod ever ran). */
  signal?: AbortSignal;
}

export async function startController({ config, logger, env, signal }: ControllerDeps): Promise<Controller> {
  const holder = holderIdentity(config.pod.name);
  const log = logger.child({ holder });
  const startedAt = performance.now();
  // A PostgreSQL that is restarting or not up yet is waited for (bounded): exiting would put the
  // sidecar into the kubelet's crash-loop backoff, which grows to minutes.
  for (let attempt = 1; ; attempt++) {
    try {
      return await startOnce(config, log, env, holder);
    } catch (error) {
      const left = config.startTimeoutMs - (performance.now() - startedAt);
      if (!isUnreachable(error) || signal?.aborted || left <= 0) throw error;
      const delay = Math.min(5_000, 250 * 2 ** (attempt - 1), left);
      log.warn(
        { err: (error as Error).message, attempt },
        `cannot reach PostgreSQL yet (${(error as Error).message}); retrying in ${delay} ms, for up to ${Math.round(left)} ms more`,
      );
      await sleep(delay, undefined, signal ? { signal } : {}).catch(() => {});
      if (signal?.aborted) throw new StartAborted();
    }
  }
}

export class StartAborted extends Error {
  constructor() {
    super("stopped before start-up finished");
    this.name = "StartAborted";
  }
}

async function startOnce(
  config: RunConfig,
  log: Logger,
  env: NodeJS.ProcessEnv,
  holder: string,
): Promise<Controller> {
  const pool = createLeasePool({
    connectionString: config.database.connectionString,
    ssl: config.database.ssl,
    max: config.poolSize,
    onIdleError: (error) =>
      log.warn({ err: error.message }, "an idle database connection failed; the pool replaced it"),
  });
  const closers: Array<() => Promise<unknown>> = [() => pool.end()];
  const closeAll = async () => {
    for (const close of closers.splice(0).reverse()) await close().catch(() => {});
  };
  try {
    return await wire(config, log, env, holder, pool, closers, closeAll);
  } catch (error) {
    await closeAll();
    throw error;
  }
}

async function wire(
  config: RunConfig,
  log: Logger,
  env: NodeJS.ProcessEnv,
  holder: string,
  pool: pg.Pool,
  closers: Array<() => Promise<unknown>>,
  closeAll: () => Promise<void>,
): Promise<Controller> {
  const { timing } = config;
  const store = new PgLeaseStore({
    pool,
    schema: config.database.schema,
    table: config.database.table,
    statementTimeoutMs: timing.callTimeoutMs,
    preparedStatements: config.database.preparedStatements,
  });
  if (config.migrate) await migrate(pool, store.table);
  else await assertTablePresent(pool, store.table);
  if (await asynchronousCommit(pool)) {
    log.warn(
      "synchronous_commit is off for this role or database: a crash could lose an acknowledged claim and reuse its fence; " +
        "set it to on (ALTER ROLE … SET synchronous_commit = on)",
    );
  }

  let feed: PgReleaseFeed | undefined;
  if (config.notify) {
    feed = new PgReleaseFeed({
      connection: {
        ...(config.database.connectionString ? { connectionString: config.database.connectionString } : {}),
        ...(config.database.ssl !== undefined ? { ssl: config.database.ssl } : {}),
      },
      table: store.table,
      onError: (error) =>
        log.warn({ err: error.message }, "release notices interrupted; polling until reconnected"),
    });
    try {
      await feed.start();
      closers.push(() => feed?.close() ?? Promise.resolve());
    } catch (error) {
      log.warn(
        { err: (error as Error).message },
        "could not LISTEN for release notices (behind a transaction-mode PgBouncer use --no-notify); polling instead",
      );
      await feed.close();
      feed = undefined;
    }
  }

  const metrics = new ControllerMetrics();
  let podShown = false;
  const publisher = await startPublisher(config, log, env, metrics, () => {
    podShown = true;
  });
  if (publisher) closers.push(() => publisher.stop());

  // Leases renewed in the same tick go out as one statement.
  const renewals = new BatchedRenewals(store);
  // Once the pod is demoted for shutdown, nothing may label it leader again.
  let demotedForShutdown = false;
  const stepBudget = Math.floor(config.gracePeriodMs / 4);
  const electors = config.leases.map(
    (key) =>
      new Elector({
        key,
        holder,
        store: renewals,
        ...(feed ? { releases: feed } : {}),
        ...timing,
        stopTimeoutMs: stepBudget,
        ...(publisher && key === config.publishLease
          ? {
              beforeRelease: () => {
                demotedForShutdown = true;
                return publisher.demote(stepBudget);
              },
            }
          : {}),
      }),
  );

  const lastTick = new Map<string, number>();
  for (const elector of electors) {
    metrics.watch(elector);
    elector.on("tick", (tick) => {
      lastTick.set(tick.key, performance.now());
      log.debug(
        { lease: tick.key, outcome: tick.outcome, action: tick.action, durationMs: tick.durationMs },
        tick.sentence,
      );
    });
    elector.on("transition", (tick) => logTransition(log, tick));
    elector.on("work-error", (error) =>
      log.error({ lease: elector.key, err: String(error) }, "leader work failed"),
    );
    if (publisher && elector.key === config.publishLease) {
      const publish = () => {
        const s = elector.status();
        if (demotedForShutdown && s.role === "leader") return;
        publisher.setDesired({ lease: s.key, role: s.role, fence: s.fence, holder: s.leader ?? "" });
      };
      elector.on("transition", publish);
      // A follower's holder annotation follows the leader it sees, even without a transition.
      elector.on("leader-changed", publish);
    }
  }

  const stallAfterMs = 3 * Math.max(timing.renewIntervalMs, timing.retryIntervalMs) + timing.callTimeoutMs;
  const startedAt = performance.now();
  const http = await startHttpServer(config.http, {
    electors,
    holder,
    pod:
      config.pod.name && config.pod.namespace
        ? { namespace: config.pod.namespace, name: config.pod.name }
        : null,
    stalled: () => {
      const now = performance.now();
      const late = electors.filter((e) => now - (lastTick.get(e.key) ?? startedAt) > stallAfterMs);
      return late.length > 0
        ? `no election tick for ${late.map((e) => e.key).join(", ")} in ${stallAfterMs} ms`
        : null;
    },
    notReady: async () => {
      const unreachable = electors.filter((e) => {
        const outcome = e.status().lastOutcome;
        return outcome === null || outcome === "transient-error";
      });
      if (unreachable.length > 0)
        return `the lease store has not answered for ${unreachable.map((e) => e.key).join(", ")}`;
      if (publisher && !podShown) return "the pod has not shown its role yet";
      return null;
    },
    metrics: async () => ({
      contentType: metrics.registry.contentType,
      body: await metrics.registry.metrics(),
    }),
  });
  closers.push(
    () =>
      new Promise((resolve) => {
        http.server.close(resolve);
        http.server.closeAllConnections();
      }),
  );

  for (const elector of electors) elector.start();
  log.info(
    { leases: config.leases, http: `${config.http.host}:${http.port}`, notify: feed !== undefined },
    `campaigning for ${config.leases.join(", ")} as ${holder}`,
  );

  let stopping: Promise<void> | null = null;
  return {
    holder,
    electors,
    httpPort: http.port,
    stop() {
      stopping ??= (async () => {
        await Promise.all(electors.map((e) => e.stop()));
        await closeAll();
        log.info("stopped");
      })();
      return stopping;
    },
  };
}

async function startPublisher(
  config: RunConfig,
  log: Logger,
  env: NodeJS.ProcessEnv,
  metrics: ControllerMetrics,
  onShown: () => void,
): Promise<PodPublisher | null> {
  const decision = decidePublishing(env);
  if (!decision.enabled) {
    log.info(decision.reason);
    return null;
  }
  const validated = validatePublishConfig({
    namespace: decision.namespace,
    podName: decision.podName,
    ...config.publish,
    peerSelector: config.publish.peerSelector ?? undefined,
  });
  if ("problems" in validated) throw new Error(`pod publishing settings: ${validated.problems.join("; ")}`);
  // Loaded only in a cluster: the Kubernetes client is most of the start-up time.
  const [{ createPodPublisher }, { loadKubeConfig }] = await Promise.all([
    import("../kube/pod-publisher.ts"),
    import("../kube/kube-config.ts"),
  ]);
  const publisher = createPodPublisher({
    kubeConfig: loadKubeConfig(decision.source),
    config: validated.config,
    logger: log.child({ component: "publisher" }),
    onPatch: (e) => metrics.observePatch(e),
    onPublished: (e) => {
      onShown();
      metrics.observePublished(e);
    },
  });
  const started = await publisher.start({
    lease: config.publishLease,
    role: "follower",
    fence: null,
    holder: "",
  });
  if (started.missingPermissions.length > 0) {
    await publisher.stop();
    throw new Error(
      `the pod's service account lacks ${started.missingPermissions.join(", ")} in namespace ${decision.namespace}; ` +
        "grant them with the Role in charts/pglease or deploy/sidecar/rbac.yaml",
    );
  }
  if (started.published) onShown();
  else
    log.warn(
      "the pod did not show the follower role within the start timeout; publishing goes on in the background",
    );
  return publisher;
}

function logTransition(log: Logger, tick: TickReport): void {
  const fields = {
    lease: tick.key,
    outcome: tick.outcome,
    fence: tick.state.term?.fence ?? tick.state.observed?.fence,
  };
  if (tick.outcome === "transient-error" || tick.outcome === "lost" || tick.outcome === "stepped-down") {
    log.warn(fields, tick.sentence);
  } else {
    log.info(fields, tick.sentence);
  }
}
