import { randomBytes } from "node:crypto";
import { hostname } from "node:os";

/**
 * A holder identity unique per process: the pod name (for whoever reads the table) plus a
 * random suffix fixed at start, so a restarted container is a new holder and bumps the fence.
 */
export function holderIdentity(podName: string = process.env.POD_NAME || hostname()): string {
  return `${podName}-${randomBytes(4).toString("hex")}`;
}
