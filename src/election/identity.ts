import { randomBytes } from "node:crypto";
import { hostname } from "node:os";

/**
 * A holder identity unique per process: the pod name (for whoever reads the table) plus a
 * random suffix fixed at start, so a restarted container is a new holder and bumps the fence.
 * With a cluster name (pods of several Kubernetes clusters campaigning for one lease), the name
 * comes first: `east/orders-0-1a2b3c4d`. Followers read it back (holderCluster) to learn that the
 * lease is held in another cluster, so the table, the history and the logs say where the leader runs.
 */
export function holderIdentity(
  podName: string = process.env.POD_NAME || hostname(),
  cluster: string | null = null,
): string {
  const base = `${podName}-${randomBytes(4).toString("hex")}`;
  return cluster === null ? base : `${cluster}${CLUSTER_SEPARATOR}${base}`;
}

/** Neither a label value (the cluster name) nor a pod name contains it. */
export const CLUSTER_SEPARATOR = "/";
// A Kubernetes label value: what --cluster-name accepts (src/config checks it with the rest).
const clusterPattern = /^([A-Za-z0-9](?:[-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)\//;

/** The cluster a holder built by holderIdentity() names, or null when it names none. */
export function holderCluster(holder: string | null): string | null {
  return (holder === null ? null : clusterPattern.exec(holder)?.[1]) ?? null;
}

/**
 * The restart proof a holder carries when its process holds its pod's restart lock for its whole
 * life (src/postgres/restart-lock.ts): `#r:`, the 32 hex digits naming that lock, a dot and the
 * instant it was bound on the boot's monotonic clock. The claim statement lets a holder take over
 * a live lease whose holder carries the same lock bound earlier, since only the predecessor's
 * death frees the lock. The marker and pattern are the contract between that SQL and this module.
 */
export const RESTART_PROOF_MARKER = "#r:";
/** Capture 1: the lock; capture 2: when it was bound. */
export const RESTART_PROOF_PATTERN = "#r:([0-9a-f]{32})\\.([0-9]{1,20})$";
const proofPattern = /#r:([0-9a-f]{32})\.([0-9]{1,20})$/;

export function withRestartProof(holder: string, lock: { token: string; boundAt: bigint }): string {
  if (!/^[0-9a-f]{32}$/.test(lock.token))
    throw new Error(`a restart lock token is 32 hex digits, got ${lock.token}`);
  return `${holder}${RESTART_PROOF_MARKER}${lock.token}.${lock.boundAt}`;
}

/** The lock a holder carries and when it bound it, or null. */
export function restartProof(holder: string | null): { token: string; boundAt: bigint } | null {
  const match = holder === null ? null : proofPattern.exec(holder);
  return match?.[1] && match[2] ? { token: match[1], boundAt: BigInt(match[2]) } : null;
}

/** True when `other` is a predecessor this holder has proven dead: the same lock, bound before. */
export function provenDeadPredecessor(self: string, other: string | null): boolean {
  const mine = restartProof(self);
  const theirs = restartProof(other);
  return mine !== null && theirs !== null && mine.token === theirs.token && theirs.boundAt < mine.boundAt;
}
