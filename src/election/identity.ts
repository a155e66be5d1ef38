import { randomBytes } from "node:crypto";
import { hostname } from "node:os";

/**
 * A holder identity unique per process: the pod name (for whoever reads the table) plus a
 * random suffix fixed at start, so a restarted container is a new holder and bumps the fence.
 */
export function holderIdentity(podName: string = process.env.POD_NAME || hostname()): string {
  return `${podName}-${randomBytes(4).toString("hex")}`;
}

/**
 * The restart proof a holder carries when its process holds its pod's restart lock for its whole
 * life (src/lease/restart-lock.ts): `#r:`, the 32 hex digits naming that lock, a dot and the
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
