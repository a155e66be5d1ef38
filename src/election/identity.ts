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
 * life (src/lease/restart-lock.ts): `#r:` and 32 hex digits naming that lock. The claim statement
 * lets a holder take over a live lease whose holder carries the same proof, since only the
 * predecessor's death frees the lock. The marker is the contract between that SQL and this module.
 */
export const RESTART_PROOF_MARKER = "#r:";
export const RESTART_PROOF_PATTERN = "#r:([0-9a-f]{32})$";
const proofPattern = new RegExp(RESTART_PROOF_PATTERN);

export function withRestartProof(holder: string, lockToken: string): string {
  if (!/^[0-9a-f]{32}$/.test(lockToken))
    throw new Error(`a restart lock token is 32 hex digits, got ${lockToken}`);
  return `${holder}${RESTART_PROOF_MARKER}${lockToken}`;
}

/** The lock token a holder carries, or null. */
export function restartProof(holder: string | null): string | null {
  return holder === null ? null : (proofPattern.exec(holder)?.[1] ?? null);
}

/** True when `other` is a predecessor this holder has proven dead: both carry the same lock. */
export function provenDeadPredecessor(self: string, other: string | null): boolean {
  const proof = restartProof(self);
  return proof !== null && other !== self && restartProof(other) === proof;
}
