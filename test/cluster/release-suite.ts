// What every real-cluster suite runs before and after its tests: the node opened, a database of
// the run's PostgreSQL bridged to the pods, one release (of charts/pglease unless the suite names
// another chart) installed in a namespace of its own; at the end the figures printed and
// everything undone (kept with PGLEASE_CLUSTER_KEEP=1). A suite changes the release's values and
// says when the release is ready for its tests.
import { randomBytes } from "node:crypto";
import { afterAll, beforeAll } from "vitest";
import { chartDir } from "../support/kube/chart.ts";
import { createTestDatabase, type TestDatabase } from "../support/postgres/database.ts";
import { bridgePostgres, type PgBridge } from "./pg-bridge.ts";
import { type Release, releaseIn, releaseValues } from "./release.ts";
import { type ClusterSession, closeSuite, helmInstall, openCluster } from "./session.ts";
import { clusterTools } from "./tools.ts";

/** A suite's cluster, database and release: set by its beforeAll, for its tests. */
export interface ReleaseSuite {
  session: ClusterSession;
  database: TestDatabase;
  bridge: PgBridge;
  release: Release;
  /** The workload's pods: the helm test pod carries the workload's labels too, and is left out. */
  selector: string;
  /** What the suite measured, printed at the end. */
  figures: Record<string, unknown>;
}

export interface ReleaseSuiteOptions {
  /** The suite's name in its log lines. */
  suite: string;
  replicas: number;
  /** The namespace's name before its random suffix. */
  namespacePrefix?: string;
  /** Another chart than charts/pglease: its folder, and its release's names in a namespace. */
  chart?: { dir: string; release(namespace: string): Release };
  /**
   * The release's values, from charts/pglease's for this cluster (`base`, from releaseValues; a
   * suite of another chart writes its own). The namespace exists by then: a suite may put in it
   * what its values refer to (a ConfigMap, a Secret).
   */
  values?(base: ReturnType<typeof releaseValues>, namespace: string): Promise<unknown> | unknown;
  /** After the install: waits until the release is as the suite's tests expect it. */
  ready?(): Promise<void>;
  /** The suite's own clean-up, run before the release is uninstalled. */
  cleanUp?(): Promise<unknown>;
}

/**
 * Registers the suite's beforeAll and afterAll (call it inside its describe); answers the suite's
 * cluster, filled in by the beforeAll. The figures object exists from the start.
 */
export function releaseSuite(options: ReleaseSuiteOptions): ReleaseSuite {
  const cluster = { figures: {} } as ReleaseSuite;

  beforeAll(async () => {
    cluster.session = await openCluster(await clusterTools());
    cluster.database = await createTestDatabase();
    cluster.bridge = await bridgePostgres(cluster.database.url);
    const namespace = `${options.namespacePrefix ?? "e2e"}-${randomBytes(3).toString("hex")}`;
    await cluster.session.kubectl(["create", "namespace", namespace]);
    const base = releaseValues(cluster.session, cluster.bridge.podUrl, options.replicas);
    const release = options.chart?.release(namespace) ?? releaseIn("orders", namespace);
    const values = options.values ? await options.values(base, namespace) : base;
    await helmInstall(cluster.session, release.name, namespace, options.chart?.dir ?? chartDir, values);
    cluster.release = release;
    cluster.selector = `${release.selector},app.kubernetes.io/component!=test`;
    await options.ready?.();
  }, 900_000);

  afterAll(async () => {
    console.log(`[${options.suite}] figures: ${JSON.stringify(cluster.figures)}`);
    // PGLEASE_CLUSTER_KEEP=1 leaves the release (and a node booted by hand) for a look after a failure.
    if (process.env.PGLEASE_CLUSTER_KEEP === "1") return;
    const { session, release, bridge, database } = cluster;
    await closeSuite(options.suite, session, [
      async () => options.cleanUp?.(),
      async () => {
        if (!release) return;
        await session.helm(["uninstall", release.name, "--namespace", release.namespace, "--wait"]);
        await session.kubectl(["delete", "namespace", release.namespace, "--wait=false"]);
      },
      async () => bridge?.close(),
      async () => database?.drop(),
    ]);
  }, 180_000);

  return cluster;
}
