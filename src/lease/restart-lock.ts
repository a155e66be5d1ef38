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
import { readFileSync, readlinkSync } from "node:fs";
import { createServer, type Server } from "node:net";

export interface RestartScope {
  /** The pod's uid (downward API metadata.uid) when in Kubernetes. */
  podUid: string | undefined;
  podName: string;
  /** host:port/database of the lease table, without credentials. */
  database: string;
  /** schema.table */
  table: string;
}

export interface RestartLock {
  /** 32 hex digits, carried in the holder identity. */
  token: string;
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

/** Binds the lock for this scope, or says why this process runs without one. */
export async function takeRestartLock(scope: RestartScope): Promise<RestartLockResult> {
  const ns = networkNamespace();
  if (!ns) return { unavailable: "no /proc network namespace to scope a restart lock (not Linux?)" };
  const token = restartToken(scope, ns);
  const server = createServer();
  const bound = await new Promise<string | null>((resolve) => {
    server.once("error", (error: NodeJS.ErrnoException) => resolve(error.code ?? error.message));
    server.listen(`\0pglease-restart-${token}`, () => resolve(null));
  });
  if (bound === "EADDRINUSE") {
    return {
      unavailable:
        "another live process of this pod holds the restart lock of this lease table (a second pglease in the pod, or kubectl exec): this one waits for expiries",
    };
  }
  if (bound !== null) return { unavailable: `could not bind the restart lock (${bound})` };
  // Held for the life of the process, without keeping it alive.
  server.unref();
  return { lock: { token, release: () => closeServer(server) } };
}

function closeServer(server: Server): Promise<void> {
  return new Promise((resolve) => server.close(() => resolve()));
}
