// Crash takeover, the Kubernetes side (docs/guarantees.md#crash-takeover-on-the-kubelets-report).
// A holder writes its identity to its container's termination message file when it starts; the
// kubelet reads that file only once the runtime saw the container's process exit, and shows it in
// the container's `state.terminated.message` (or `lastState.terminated.message`, once the
// container waits to be restarted or runs again). Each run has its own file, so the message names
// the process of that very run: a report of an earlier run names an earlier holder, never the
// current one. Followers read their peers' statuses (peer-view.ts) and report the holders named
// there to the elector's witness.
import { CLUSTER_SEPARATOR, RESTART_PROOF_MARKER } from "../election/identity.ts";
import type { Pod } from "./client/api-types.ts";

// Not node:fs/promises, which loads readline and the file watchers (downward-api.ts says why).
const writeFile = process
  .getBuiltinModule("node:util")
  .promisify(process.getBuiltinModule("node:fs").writeFile);

/** The line a holder writes; the follower matches it whole, so no log line or reason can pass for it. */
const PREFIX = "pglease-holder ";

export function terminationMessage(holder: string): string {
  return `${PREFIX}${holder}\n`;
}

/** Writes this process's identity where the kubelet reads the container's termination message. */
export function writeTerminationMessage(path: string, holder: string): Promise<void> {
  return writeFile(path, terminationMessage(holder));
}

/**
 * The pod a holder of holderIdentity() runs in (`[cluster/]pod-<8 hex>#r:…`), or null for a holder
 * of another cluster or without a restart proof.
 */
export function holderPod(holder: string, cluster: string | null): string | null {
  const proof = holder.indexOf(RESTART_PROOF_MARKER);
  if (proof < 0) return null;
  let base = holder.slice(0, proof);
  if (cluster !== null) {
    if (!base.startsWith(`${cluster}${CLUSTER_SEPARATOR}`)) return null;
    base = base.slice(cluster.length + 1);
  } else if (base.includes(CLUSTER_SEPARATOR)) return null;
  return /^(.+)-[0-9a-f]{8}$/.exec(base)?.[1] ?? null;
}

/**
 * The holders the kubelet reports dead in `pod`: a terminated run (the current state, or the last
 * one) of the sidecar container whose message names a holder of this very pod. A native sidecar's
 * status is among the init containers', a plain sidecar's among the containers'.
 */
export function holdersReportedDead(pod: Pod, cluster: string | null, sidecarContainer: string): string[] {
  const name = pod.metadata?.name;
  // Only the sidecar's own runs: another container of the pod naming the holder (its message file
  // pointed at the same path) is not the holder's process.
  const statuses = [
    ...(pod.status?.initContainerStatuses ?? []),
    ...(pod.status?.containerStatuses ?? []),
  ].filter((status) => status.name === sidecarContainer);
  const dead: string[] = [];
  for (const status of statuses) {
    for (const terminated of [status.state?.terminated, status.lastState?.terminated]) {
      for (const line of terminated?.message?.split("\n") ?? []) {
        if (!line.startsWith(PREFIX)) continue;
        const holder = line.slice(PREFIX.length);
        // Another pod's holder in this pod's status is forged: only the holder's own pod counts.
        if (name !== undefined && holderPod(holder, cluster) === name) dead.push(holder);
      }
    }
  }
  return dead;
}
