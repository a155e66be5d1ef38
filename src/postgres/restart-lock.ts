// The restart lock: a lock a process holds for its whole life and the kernel frees when it dies,
// so a process that obtains it knows its predecessor is dead. It is an abstract Unix socket: its
// name lives in the network namespace, which every container of a pod shares, and binding fails
// while another process holds it. Its token goes into the holder identity (the restart proof),
// and the claim statement lets a holder with the same proof take over a live lease at once.
//
// The token hashes the network namespace (boot id + namespace inode: the scope in which the name
// is exclusive), the pod (uid and name, so pods sharing the host's namespace get locks of their
// own) and the lease table with its database. A process in another namespace, pod or boot gets
// another token and can never use a proof it did not bind.
import { createHash } from "node:crypto";
import { createServer, type Server } from "node:net";

const { readFileSync, readlinkSync } = process.getBuiltinModule("node:fs");

export interface RestartScope {
  /** The pod's uid (downward API metadata.uid) when in Kubernetes. */
  podUid: string | undefined;
  podName: string;
  /** No POD_NAME: the machine (its host name) stands for the pod, e.g. on a laptop. */
  outsidePod?: boolean;
  /** host:port/database of the lease table, without credentials. */
  database: string;
  /** schema.table */
  table: string;
}

export interface RestartLock {
  /** 32 hex digits, carried in the holder identity. */
  token: string;
  /**
   * When it was bound, on this boot's monotonic clock (ns): the token names the boot, so a later
   * holder of the same lock has a larger one, and a dead holder's late claim cannot win it back.
   */
  boundAt: bigint;
  /** Frees the lock; only once this process's campaigns are over. */
  release(): Promise<void>;
}

export type RestartLockResult = { lock: RestartLock } | { unavailable: string };

/** The kernel facts the lock's exclusivity rests on; absent outside Linux. */
export function networkNamespace(): { bootId: string; namespace: string } | null {
  try {
    return {
      bootId: readFileSync("/proc/sys/kernel/random/boot_id", "utf8").trim(),
      namespace: readlinkSync("/proc/self/ns/net"),
    };
  } catch {
    return null;
  }
}

export function restartToken(scope: RestartScope, ns: { bootId: string; namespace: string }): string {
  const parts = [ns.bootId, ns.namespace, scope.podUid ?? "", scope.podName, scope.database, scope.table];
  return createHash("sha256").update(JSON.stringify(parts)).digest("hex").slice(0, 32);
}

/**
 * Binds the lock for this scope, or says why this process runs without one. `onMainThread` is
 * asked of node:worker_threads when the caller leaves it undefined; `pglease run` knows (it is its
 * process's main thread by construction) and spares the sidecar that module's resident memory.
 */
export async function takeRestartLock(
  scope: RestartScope,
  onMainThread: boolean = process.getBuiltinModule("node:worker_threads").isMainThread,
): Promise<RestartLockResult> {
  // A worker thread's sockets close with the thread, while the process (and its work) lives on.
  if (!onMainThread)
    return { unavailable: "the restart lock belongs to a process's main thread, not a worker thread" };
  const ns = networkNamespace();
  if (!ns) return { unavailable: "no /proc network namespace to scope a restart lock (not Linux?)" };
  const token = restartToken(scope, ns);
  const server = createServer();
  const bound = await new Promise<string | null>((resolve) => {
    server.once("error", (error: NodeJS.ErrnoException) => resolve(error.code ?? error.message));
    // exclusive: a cluster worker would otherwise share the primary's socket with its siblings.
    server.listen({ path: `\0pglease-restart-${token}`, exclusive: true }, () => resolve(null));
  });
  if (bound === "EADDRINUSE") {
    return {
      unavailable: scope.outsidePod
        ? "another live process on this machine campaigns on the same lease table (a second pglease run, or the library; without POD_NAME the machine stands for the pod): this one waits for expiries"
        : "another live process of this pod holds the restart lock of this lease table (a second pglease in the pod, or kubectl exec): this one waits for expiries",
    };
  }
  if (bound !== null) return { unavailable: `could not bind the restart lock (${bound})` };
  // Held for the life of the process, without keeping it alive.
  server.unref();
  return { lock: { token, boundAt: process.hrtime.bigint(), release: () => closeServer(server) } };
}

function closeServer(server: Server): Promise<void> {
  return new Promise((resolve) => server.close(() => resolve()));
}
