// What a cluster suite runs on: the node (booted here unless one is already up, then torn down
// at the end), the pglease image imported, the run's PostgreSQL bridged to the pods, and
// kubectl/helm with the admin kubeconfig.
import { execFile } from "node:child_process";
import { mkdir, mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { skipBecause } from "../support/skip.ts";
import { buildImage, type Image, importImage } from "./images.ts";
import { paths } from "./layout.ts";
import { guardDrops } from "./network.ts";
import { down, holder, kubectlFor, type TeardownReport, up } from "./node.ts";
import { type ClusterTools, clusterToolsAvailable } from "./tools.ts";

const run = promisify(execFile);

/**
 * Why the cluster suites cannot run here, or null. Where the run has said it built the cluster
 * (PGLEASE_CLUSTER_REQUIRED=1, as a CI that runs `scripts/build-kube-cluster.sh` sets it), a
 * missing cluster is an error, not a skip: the suites are what proves the chart in a real cluster.
 */
export async function clusterSkipReason(suite: string): Promise<string | null> {
  const available = await clusterToolsAvailable();
  if (available.ok) return null;
  if (process.env.PGLEASE_CLUSTER_REQUIRED === "1") {
    throw new Error(`[${suite}] PGLEASE_CLUSTER_REQUIRED=1 but no cluster here: ${available.reason}`);
  }
  skipBecause(suite, available.reason);
  return available.reason;
}

export interface ClusterSession {
  tools: ClusterTools;
  kubectl(args: string[], input?: string): Promise<string>;
  helm(args: string[]): Promise<string>;
  image: Image;
  /** This session booted the node (and tears it down); false when one was already up. */
  booted: boolean;
  bootMs: number | null;
  /** Tears the node down when this session booted it; answers the guard's drop count and the teardown time. */
  close(): Promise<Omit<TeardownReport, "teardownMs"> & { teardownMs: number | null }>;
}

/** How long a suite waits for another test run's node (one node per machine) before it fails. */
const WAIT_FOR_OTHER_RUN_MS = 15 * 60_000;

/**
 * The machine's one node, held by one suite at a time: a lock directory (mkdir is atomic) naming
 * its owner's pid. Two suites of one vitest run start in parallel workers; without it both saw no
 * node and both booted one into the same folders (seen: "containerd.toml: no such file").
 */
const SUITE_LOCK = `${paths.base}.lock`;

function running(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === "EPERM";
  }
}

async function lockNode(deadline: number): Promise<() => Promise<void>> {
  for (;;) {
    try {
      await mkdir(SUITE_LOCK);
      await writeFile(join(SUITE_LOCK, "owner"), String(process.pid));
      return () => rm(SUITE_LOCK, { recursive: true, force: true });
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== "EEXIST") throw error;
    }
    const owner = Number(await readFile(join(SUITE_LOCK, "owner"), "utf8").catch(() => ""));
    // A lock whose owner died is taken over; one being written (no owner yet) is waited for.
    if (owner > 0 && !running(owner)) await rm(SUITE_LOCK, { recursive: true, force: true });
    else if (Date.now() > deadline)
      throw new Error(`the cluster stayed in use by another suite (${SUITE_LOCK})`);
    else await new Promise((resolve) => setTimeout(resolve, 500));
  }
}

export async function openCluster(tools: ClusterTools): Promise<ClusterSession> {
  // One node per machine: a node another test run holds is waited for; one a dead run left is torn down.
  const deadline = Date.now() + WAIT_FOR_OTHER_RUN_MS;
  const unlock = await lockNode(deadline);
  try {
    return await openLocked(tools, deadline, unlock);
  } catch (error) {
    await unlock();
    throw error;
  }
}

async function openLocked(
  tools: ClusterTools,
  deadline: number,
  unlock: () => Promise<void>,
): Promise<ClusterSession> {
  while ((await holder()) === "live") {
    if (Date.now() > deadline)
      throw new Error(`the cluster stayed in use by another test run (${paths.state})`);
    await new Promise((resolve) => setTimeout(resolve, 1_000));
  }
  if ((await holder()) === "stale") await down(() => undefined);
  const booted = (await holder()) === "none";
  let bootMs: number | null = null;
  if (booted) {
    try {
      bootMs = (await up(() => undefined, process.pid)).bootMs;
    } catch (error) {
      await down(() => undefined);
      throw error;
    }
  }
  const image = await buildImage("pglease");
  await importImage(tools, image);
  const kubectl = kubectlFor(tools);
  const helm = async (args: string[]) =>
    (
      await run(tools.helm, [`--kubeconfig=${paths.adminKubeconfig}`, ...args], {
        maxBuffer: 16 * 1024 * 1024,
      })
    ).stdout;
  return {
    tools,
    kubectl,
    helm,
    image,
    booted,
    bootMs,
    async close() {
      try {
        if (!booted) return { guardDrops: await guardDrops(), teardownMs: null, sysctlsNotRestored: [] };
        return await down(() => undefined);
      } finally {
        await unlock();
      }
    },
  };
}

/**
 * A suite's afterAll: each clean-up step (the release, the bridge, the database) is tried, and then
 * the node is torn down whatever they did; then the first step's failure is thrown, or a packet of
 * the cluster's range the host guard dropped, or a host setting not put back.
 */
export async function closeSuite(
  suite: string,
  session: ClusterSession | undefined,
  steps: (() => Promise<unknown>)[],
): Promise<void> {
  const failures: unknown[] = [];
  for (const step of steps) await step().catch((error: unknown) => failures.push(error));
  const closed = await session?.close();
  console.log(`[${suite}] teardown: ${JSON.stringify(closed)}`);
  if (failures.length) throw failures[0];
  if (closed?.guardDrops)
    throw new Error(`the host guard dropped ${closed.guardDrops} packets of the cluster's range`);
  if (closed?.sysctlsNotRestored.length)
    throw new Error(`host settings not restored: ${closed.sysctlsNotRestored.join(", ")}`);
}

/** helm install with a values object; answers helm's output. */
export async function helmInstall(
  session: ClusterSession,
  release: string,
  namespace: string,
  chart: string,
  values: unknown,
  extra: string[] = [],
): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), "pglease-cluster-values-"));
  try {
    const file = join(dir, "values.json");
    await writeFile(file, JSON.stringify(values));
    return await session.helm([
      "install",
      release,
      chart,
      "--namespace",
      namespace,
      "--values",
      file,
      ...extra,
    ]);
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

export interface PodView {
  name: string;
  labels: Record<string, string>;
  annotations: Record<string, string>;
  ready: boolean;
  deleting: boolean;
  ip: string | undefined;
  /** Each container's restart count, init (native sidecar) containers included. */
  restarts: Record<string, number>;
  /** Each container's runtime id (containerd's, without the scheme). */
  containerIds: Record<string, string>;
}

interface PodJson {
  metadata: {
    name: string;
    labels?: Record<string, string>;
    annotations?: Record<string, string>;
    deletionTimestamp?: string;
  };
  status?: {
    podIP?: string;
    conditions?: { type: string; status: string }[];
    containerStatuses?: { name: string; restartCount: number; containerID?: string }[];
    initContainerStatuses?: { name: string; restartCount: number; containerID?: string }[];
  };
}

export async function pods(session: ClusterSession, namespace: string, selector: string): Promise<PodView[]> {
  const list = JSON.parse(
    await session.kubectl(["get", "pods", "-n", namespace, "-l", selector, "-o", "json"]),
  );
  return (list.items as PodJson[]).map((pod) => ({
    name: pod.metadata.name,
    labels: pod.metadata.labels ?? {},
    annotations: pod.metadata.annotations ?? {},
    ready: pod.status?.conditions?.some((c) => c.type === "Ready" && c.status === "True") ?? false,
    deleting: pod.metadata.deletionTimestamp !== undefined,
    ip: pod.status?.podIP,
    restarts: Object.fromEntries(
      [...(pod.status?.initContainerStatuses ?? []), ...(pod.status?.containerStatuses ?? [])].map((c) => [
        c.name,
        c.restartCount,
      ]),
    ),
    containerIds: Object.fromEntries(
      [...(pod.status?.initContainerStatuses ?? []), ...(pod.status?.containerStatuses ?? [])].map((c) => [
        c.name,
        (c.containerID ?? "").replace(/^containerd:\/\//, ""),
      ]),
    ),
  }));
}

/** The pods behind a Service that its EndpointSlices list as ready. */
export async function readyEndpoints(
  session: ClusterSession,
  namespace: string,
  service: string,
): Promise<string[]> {
  const list = JSON.parse(
    await session.kubectl([
      "get",
      "endpointslices",
      "-n",
      namespace,
      "-l",
      `kubernetes.io/service-name=${service}`,
      "-o",
      "json",
    ]),
  );
  const names = new Set<string>();
  for (const slice of list.items as {
    endpoints?: { conditions?: { ready?: boolean }; targetRef?: { name: string } }[];
  }[]) {
    for (const endpoint of slice.endpoints ?? []) {
      if (endpoint.conditions?.ready === false) continue;
      names.add(endpoint.targetRef?.name ?? "?");
    }
  }
  return [...names].sort();
}

/** Polls until `read` answers something `done` accepts; fails with the last answer. */
export async function until<T>(
  what: string,
  timeoutMs: number,
  read: () => Promise<T>,
  done: (value: T) => boolean,
  everyMs = 250,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  let last: T | undefined;
  let error: unknown;
  while (Date.now() < deadline) {
    try {
      last = await read();
      if (done(last)) return last;
    } catch (e) {
      error = e;
    }
    await new Promise((resolve) => setTimeout(resolve, everyMs));
  }
  throw new Error(
    `${what}: not after ${timeoutMs} ms; last: ${JSON.stringify(last)}${error ? ` (${(error as Error).message})` : ""}`,
  );
}

/** For a failure message: each pod's containers' last log lines (the previous run's when one crashed). */
export async function describePods(
  session: ClusterSession,
  namespace: string,
  selector: string,
): Promise<string> {
  const out: string[] = [];
  for (const pod of await pods(session, namespace, selector)) {
    for (const [container, restarts] of Object.entries(pod.restarts)) {
      const args = ["logs", "-n", namespace, pod.name, "-c", container, "--tail=15"];
      const text = await session
        .kubectl(restarts > 0 ? [...args, "--previous"] : args)
        .catch((e: Error) => `(no log: ${e.message})`);
      out.push(`--- ${pod.name}/${container} (restarts ${restarts}) ---\n${text}`);
    }
  }
  return out.join("\n");
}

/** The host pid of a container's first process, from containerd's task list. */
export async function containerPid(session: ClusterSession, containerId: string): Promise<number> {
  const { stdout } = await run(join(session.tools.dir, "ctr"), [
    "--address",
    paths.containerdSocket,
    "--namespace",
    "k8s.io",
    "tasks",
    "ls",
  ]);
  const line = stdout.split("\n").find((l) => l.startsWith(`${containerId} `));
  const pid = Number(line?.trim().split(/\s+/)[1]);
  if (!pid) throw new Error(`no running task for container ${containerId}`);
  return pid;
}
