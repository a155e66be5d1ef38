// Two Kubernetes clusters sharing one lease in one PostgreSQL: each a real kube-apiserver (its own
// process, etcd and CA) with the chart's RBAC and pods its kubelet reports Running; in each pod the
// real `pglease run` sidecar with --cluster-name, reaching PostgreSQL through its own fault proxy
// (so one cluster can be cut from the database) and only its own cluster's API server. The role
// labels of both clusters are recorded by a watch on each server.
import { mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { CoreV1Api, KubeConfig, type V1Pod } from "@kubernetes/client-node";
import pg from "pg";
import { holderCluster } from "../../src/election/identity.ts";
import type { ClusterLabels, HandOver } from "../chaos/cluster-labels.ts";
import { type LabelWatch, watchRoleLabels } from "../chaos/label-watch.ts";
import type { Interval } from "../chaos/timeline.ts";
import { type RealKubeApiServer, startRealKubeApiServer } from "../support/kube/real-kube-apiserver.ts";
import { type ChartIdentity, createRunningPod, installChartRbac } from "../support/kube/real-kube-cluster.ts";
import { freePort } from "../support/postgres/embedded-postgres.ts";
import { type FaultProxy, startFaultProxy } from "../support/postgres/fault-proxy.ts";
import { type Running, startPglease } from "../support/processes/cli.ts";

export const ROLE_LABEL = "pglease.io/role";
export const LEADER_CLUSTER = "pglease.io/leader-cluster";
const APP_LABELS = { "app.kubernetes.io/name": "orders", "app.kubernetes.io/instance": "prod" };

export interface Cluster {
  name: string;
  server: RealKubeApiServer;
  admin: KubeConfig;
}

/** A real API server, its cluster called `name`; each test's World installs the chart's RBAC in its namespace. */
export async function startCluster(name: string): Promise<Cluster> {
  const server = await startRealKubeApiServer();
  return { name, server, admin: server.admin() };
}

/** SIGSTOP of the API server (and the etcd it embeds): it answers nothing until the returned call. */
export function freeze(cluster: Cluster): () => void {
  process.kill(cluster.server.info.pid, "SIGSTOP");
  return () => process.kill(cluster.server.info.pid, "SIGCONT");
}

export interface Sidecar {
  cluster: string;
  pod: string;
  run: Running;
  db: FaultProxy;
  alive(): boolean;
}

export interface WorldOptions {
  namespace: string;
  lease: string;
  databaseUrl: string;
  duration: string;
}

/**
 * One test's world in its own namespace of the shared clusters: pods, sidecars and label watches;
 * close() takes them down and leaves the API servers running.
 */
export class World {
  readonly options: WorldOptions;
  readonly clusters = new Map<string, Cluster & { identity: ChartIdentity }>();
  readonly watches = new Map<string, LabelWatch>();
  readonly sidecars: Sidecar[] = [];
  readonly #dir: Promise<string>;
  readonly #pool: pg.Pool;

  constructor(options: WorldOptions) {
    this.options = options;
    this.#dir = mkdtemp(join(tmpdir(), "pglease-clusters-"));
    this.#pool = new pg.Pool({ connectionString: options.databaseUrl, max: 1 });
  }

  async addCluster(cluster: Cluster): Promise<void> {
    const identity = await installChartRbac(cluster.admin, this.options.namespace);
    this.clusters.set(cluster.name, { ...cluster, identity });
    const ca = await readFile(cluster.server.info.caFile);
    this.watches.set(
      cluster.name,
      watchRoleLabels({
        serverUrl: cluster.server.info.server,
        token: identity.token,
        ca,
        namespace: this.options.namespace,
        roleLabel: ROLE_LABEL,
      }),
    );
  }

  #cluster(name: string): Cluster & { identity: ChartIdentity } {
    const cluster = this.clusters.get(name);
    if (!cluster) throw new Error(`no cluster ${name}`);
    return cluster;
  }

  /** Creates the pod (Running, as its kubelet reports) unless it exists, and starts its sidecar. */
  async startPod(clusterName: string, pod: string): Promise<Sidecar> {
    const cluster = this.#cluster(clusterName);
    const { namespace } = this.options;
    if (!(await this.pod(clusterName, pod))) {
      await createRunningPod(cluster.admin, namespace, { metadata: { name: pod, labels: APP_LABELS } });
    }
    const kubeconfig = join(await this.#dir, `${clusterName}-${pod}.kubeconfig`);
    await writeFile(kubeconfig, kubeConfigText(cluster, namespace));
    const db = await startFaultProxy(databaseAddress(this.options.databaseUrl));
    const port = await freePort();
    const run = startPglease(
      [
        ...["run", "--lease", this.options.lease, "--duration", this.options.duration],
        ...["--retry-interval", "200ms", "--grace-period", "3s", "--http-addr", `127.0.0.1:${port}`],
        ...["--cluster-name", clusterName],
      ],
      {
        DATABASE_URL: db.url(this.options.databaseUrl),
        KUBECONFIG: kubeconfig,
        POD_NAME: pod,
        POD_NAMESPACE: namespace,
      },
    );
    const sidecar: Sidecar = {
      cluster: clusterName,
      pod,
      run,
      db,
      alive: () => run.child.exitCode === null && run.child.signalCode === null,
    };
    this.sidecars.push(sidecar);
    await run.waitForLog(/^campaigning for /, 60_000);
    return sidecar;
  }

  /** SIGKILL: the process dies, its pod (and whatever labels it carries) stays, as on a lost node. */
  async kill(sidecar: Sidecar): Promise<void> {
    const index = this.sidecars.indexOf(sidecar);
    if (index < 0) return;
    this.sidecars.splice(index, 1);
    await sidecar.run.stop("SIGKILL");
    await sidecar.db.close();
  }

  async pod(clusterName: string, name: string): Promise<V1Pod | undefined> {
    const core = this.#cluster(clusterName).admin.makeApiClient(CoreV1Api);
    return core.readNamespacedPod({ namespace: this.options.namespace, name }).catch(() => undefined);
  }

  /** Every pod labelled leader, as `cluster/pod`, read from each (or each named) cluster's API server now. */
  async labelledLeaders(only?: string[]): Promise<string[]> {
    const out: string[] = [];
    for (const [name, cluster] of this.clusters) {
      if (only && !only.includes(name)) continue;
      const pods = await cluster.admin.makeApiClient(CoreV1Api).listNamespacedPod({
        namespace: this.options.namespace,
        labelSelector: `${ROLE_LABEL}=leader`,
      });
      out.push(...pods.items.map((p) => `${name}/${p.metadata?.name}`));
    }
    return out.sort();
  }

  /** The holder in the lease table, if the lease is held (not expired) now. */
  async holder(): Promise<string | null> {
    const { rows } = await this.#pool.query(
      "SELECT holder FROM pglease_leases WHERE key = $1 AND expires_at > clock_timestamp()",
      [this.options.lease],
    );
    return rows[0]?.holder ?? null;
  }

  /** Every change of hands of the lease, from its history table (the server's clock, this host's too). */
  async handOvers(): Promise<HandOver[]> {
    const { rows } = await this.#pool.query(
      `SELECT (extract(epoch FROM changed_at) * 1000)::float8 AS at, holder FROM pglease_leases_history
        WHERE key = $1 AND holder IS NOT NULL ORDER BY id`,
      [this.options.lease],
    );
    return rows.map((r: { at: number; holder: string }) => ({ at: r.at, cluster: holderCluster(r.holder) }));
  }

  /** Each cluster's recorded label changes, with the windows in which the test left it unable to act. */
  labels(unable: Record<string, Interval[]> = {}): ClusterLabels[] {
    return [...this.watches].map(([cluster, watch]) => ({
      cluster,
      changes: watch.changes,
      unable: unable[cluster] ?? [],
    }));
  }

  async close(): Promise<void> {
    await Promise.allSettled([...this.sidecars].map((s) => this.kill(s)));
    for (const watch of this.watches.values()) watch.close();
    await this.#pool.end();
    await rm(await this.#dir, { recursive: true, force: true });
  }
}

/** `cluster/pod` of a holder identity built with a cluster name (`east/e0-1a2b3c4d#r:…`). */
export function podOf(holder: string | null): string | null {
  return holder?.replace(/#r:.*$/, "").replace(/-[0-9a-f]{8}$/, "") ?? null;
}

/** SIGSTOP of a sidecar process: it runs nothing (no claim, no patch) until the returned call. */
export function pause(sidecar: Sidecar): () => void {
  sidecar.run.child.kill("SIGSTOP");
  return () => sidecar.run.child.kill("SIGCONT");
}

function databaseAddress(url: string): { host: string; port: number } {
  const parsed = new URL(url);
  return { host: parsed.hostname, port: Number(parsed.port || 5432) };
}

function kubeConfigText(cluster: Cluster & { identity: ChartIdentity }, namespace: string): string {
  const kc = new KubeConfig();
  kc.loadFromOptions({
    clusters: [
      { name: cluster.name, server: cluster.server.info.server, caFile: cluster.server.info.caFile },
    ],
    users: [{ name: "pglease", token: cluster.identity.token }],
    contexts: [{ name: cluster.name, cluster: cluster.name, user: "pglease", namespace }],
    currentContext: cluster.name,
  });
  return kc.exportConfig();
}

/** Polls `check` every 100 ms until it holds, or fails after `timeoutMs` naming what it waited for. */
export async function eventually(what: string, check: () => Promise<boolean>, timeoutMs = 30_000) {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}
