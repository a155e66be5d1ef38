// Gap, never overlap: a new leader first takes the leader label off any other pod of the
// same lease that still carries it (an old leader that froze or lost the API server cannot
// do it itself), and only then labels itself. Any failure here stops the self-label.
// Across clusters the same pass runs in a follower that sees the lease held in another cluster,
// whose new leader cannot reach this cluster's pods (reconcile.ts).
import type { Pod } from "./client/api-types.ts";
import { conditionPatch, desiredPod, type MetadataPatch } from "./desired-state.ts";
import { KubeRequestError, type PodApi } from "./pod-api.ts";
import type { PublishConfig } from "./publish-config.ts";

export interface PeerDemotionOptions {
  api: PodApi;
  config: PublishConfig;
  peerSelector: string;
  lease: string;
  wallClock: () => Date;
  /**
   * Asked before each patch. The list can be seconds old by then: a process that lost the lease
   * meanwhile (or, for a follower, a holder that changed) would take the label off the new leader,
   * so it stops at the first false.
   */
  stillLeads: () => boolean;
  /** Wraps each patch so the caller can time it and count it. */
  observe: <T>(run: () => Promise<T>) => Promise<T>;
}

export interface PeerDemotion {
  demoted: string[];
  /** stillLeads() answered false: the remaining peers were left alone. */
  stoppedEarly: boolean;
}

/** Demotes every other pod still labelled leader for this lease, while this process still leads. */
export async function demoteStalePeers(opts: PeerDemotionOptions): Promise<PeerDemotion> {
  const { config } = opts;
  const selector = `${opts.peerSelector},${config.roleLabel}=${config.leaderValue}`;
  const peers = (await opts.api.listPods(selector)).filter((pod) => isStaleLeader(pod, opts));
  // What the peer's own publisher would write as a follower, so a live peer has nothing to fix.
  const follower = desiredPod({ lease: opts.lease, role: "follower", fence: null, holder: "" }, config);
  const demoted: string[] = [];
  for (const peer of peers) {
    const name = peer.metadata?.name as string;
    try {
      if (!opts.stillLeads()) return { demoted, stoppedEarly: true };
      await opts.observe(() => opts.api.patchMetadata(name, demotion(config)));
      // A peer once started is finished: a follower label beside a True condition would mislead.
      const status = conditionPatch(follower, peer, opts.wallClock());
      if (status) await opts.observe(() => opts.api.patchStatus(name, status));
      demoted.push(name);
    } catch (error) {
      // A peer deleted meanwhile no longer carries any label: nothing left to do for it.
      if (!(error instanceof KubeRequestError && error.kind === "not-found")) throw error;
    }
  }
  return { demoted, stoppedEarly: false };
}

/**
 * The follower label, and the old term's fence and holder removed: a reader of the peer's
 * annotations (the downward API, kubectl) must not take the old fence for a current one. The
 * lease annotation stays as it is: it says which lease the pod competes for, not who leads.
 */
function demotion(config: PublishConfig): MetadataPatch {
  return {
    metadata: {
      labels: { [config.roleLabel]: config.followerValue },
      annotations: { [config.fenceAnnotation]: null, [config.holderAnnotation]: null },
    },
  };
}

function isStaleLeader(pod: Pod, opts: PeerDemotionOptions): boolean {
  if (pod.metadata?.name === opts.config.podName) return false;
  if (pod.metadata?.labels?.[opts.config.roleLabel] !== opts.config.leaderValue) return false;
  const lease = pod.metadata?.annotations?.[opts.config.leaseAnnotation];
  return lease === undefined || lease === opts.lease;
}
