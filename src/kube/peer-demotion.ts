// Gap, never overlap: a new leader first takes the leader label off any other pod of the
// same lease that still carries it (an old leader that froze or lost the API server cannot
// do it itself), and only then labels itself. Any failure here stops the self-label. In its term's
// first pass it also fences off every other pod of the lease, so that an older term's label still
// on its way is refused by the API server (guarded-patch.ts says how and why).
// Across clusters the same pass runs in a follower that sees the lease held in another cluster,
// whose new leader cannot reach this cluster's pods (reconcile.ts).
// Each write is pinned to the uid the peer had where it was seen: a peer replaced meanwhile by a
// pod of the same name (its next incarnation, which may lead by now) refuses it.

import { POD_CONTRACT } from "../shared/pod-contract.ts";
import type { Pod } from "./client/api-types.ts";
import { conditionPatch, desiredPod, type MetadataPatch } from "./desired-state.ts";
import { fenceOff, guardedPatch } from "./guarded-patch.ts";
import { KubeRequestError, type PodApi } from "./pod-api.ts";
import type { PublishConfig } from "./publish-config.ts";

export interface PeerDemotionOptions {
  api: PodApi;
  config: PublishConfig;
  /** The pods to look at: a list of the leader-labelled peers, or the peer view's pods. */
  peers: Pod[];
  lease: string;
  /** Leaders labelled by a term older than this are stale; null: all of them (a term's first pass). */
  fence: number | null;
  /**
   * The fence of the term that demotes, written into each pod it patches (superseded-by); null
   * for a follower clearing its cluster for a holder in another cluster (it knows no fence).
   */
  term: number | null;
  /** Also fence off the peers not labelled leader: a term's first pass, before its self-label. */
  fenceOffAll: boolean;
  wallClock: () => Date;
  /**
   * Asked before the patches, which then go out together. The peers can be seconds old by then: a
   * process that lost the lease meanwhile (or, for a follower, a holder that changed) would take
   * the label off the new leader, so it sends none on false.
   */
  stillLeads: () => boolean;
  /** Wraps each patch so the caller can time it and count it. */
  observe: <T>(run: () => Promise<T>) => Promise<T>;
  /** Each demoted peer as the API server answered. */
  demotedPod: (pod: Pod) => void;
}

export interface PeerDemotion {
  demoted: string[];
  /** stillLeads() answered false: the remaining peers were left alone. */
  stoppedEarly: boolean;
}

/** The leader-labelled peers of a peer selector, as the list at the moment of handover asks for them. */
export function leaderSelector(config: PublishConfig, peerSelector: string): string {
  return `${peerSelector},${config.roleLabel}=${config.leaderValue}`;
}

/**
 * Demotes every other pod still labelled leader for this lease by an older term and, with
 * fenceOffAll, fences off the others, while this process still leads. Each patch is guarded: a
 * peer that changed under it (seen not leading and labelled meanwhile, fenced off by another term)
 * fails the pass, which reads the peers again. A demotion applies whatever the peer's labels
 * became: a leader label that came back is taken off by it too, and a newer term's (higher fence)
 * would only leave a gap, which that term's own publisher closes.
 */
export async function demoteStalePeers(opts: PeerDemotionOptions): Promise<PeerDemotion> {
  const { config } = opts;
  const work = opts.peers.flatMap((pod) => {
    const patch = peerPatch(pod, opts);
    return patch === null ? [] : [{ pod, ...patch }];
  });
  if (work.length === 0) return { demoted: [], stoppedEarly: false };
  if (!opts.stillLeads()) return { demoted: [], stoppedEarly: true };
  // What the peer's own publisher would write as a follower, so a live peer has nothing to fix.
  const follower = desiredPod({ lease: opts.lease, role: "follower", fence: null, holder: "" }, config);
  const results = await Promise.allSettled(
    work.map(async ({ pod, change, demote }) => {
      const name = pod.metadata?.name as string;
      const target = { name, uid: pod.metadata?.uid };
      // The label as seen is guarded on a fencing write: a peer seen not leading that labels itself
      // meanwhile must be read again and demoted, not fenced off with its label left on. A demotion
      // needs no such guard: it takes the label off whatever the peer wrote since, so the stopping
      // leader's own demotion landing first (it is sent beside its release) costs no refusal, no
      // second list and no second patch. Only superseded-by is guarded: fencing writes only raise it.
      const guards = demote
        ? { annotations: [POD_CONTRACT.supersededAnnotation], removeGone: true }
        : { labels: [config.roleLabel], annotations: [POD_CONTRACT.supersededAnnotation] };
      // A peer once started is finished: a follower label beside a True condition would mislead.
      // Both go out at once (the self-label waits for both): one round trip in the handover, not two.
      const status = demote ? conditionPatch(follower, pod, opts.wallClock()) : null;
      try {
        const answers = await Promise.all([
          opts.observe(() => opts.api.patchMetadataGuarded(target, guardedPatch(pod, change, guards))),
          ...(status ? [opts.observe(() => opts.api.patchStatus(target, status))] : []),
        ]);
        for (const answer of answers) opts.demotedPod(answer);
        return demote ? name : null;
      } catch (error) {
        // A peer deleted meanwhile no longer carries any label; one replaced by a pod of its name is
        // gone too, and the new pod is a peer of its own, written to on its own if it must be.
        if (error instanceof KubeRequestError && (error.kind === "not-found" || error.kind === "another-pod"))
          return null;
        throw error;
      }
    }),
  );
  const failed = results.find((r) => r.status === "rejected");
  if (failed) throw failed.reason;
  const demoted = results.flatMap((r) => (r.status === "fulfilled" && r.value !== null ? [r.value] : []));
  return { demoted, stoppedEarly: false };
}

/** What to write on `pod`: a demotion (fenced off too), a fencing write alone, or null. */
function peerPatch(pod: Pod, opts: PeerDemotionOptions): { change: MetadataPatch; demote: boolean } | null {
  const { config } = opts;
  if (pod.metadata?.name === config.podName) return null;
  const theirLease = pod.metadata?.annotations?.[config.leaseAnnotation];
  if (theirLease !== undefined && theirLease !== opts.lease) return null;
  const fenced = opts.term === null ? null : fenceOff(pod, opts.term);
  if (isStaleLeader(pod, config, opts.lease, opts.fence)) {
    const change = demotion(config);
    change.metadata.annotations = { ...change.metadata.annotations, ...fenced };
    return { change, demote: true };
  }
  // A peer labelled by a newer term is left to win (reconcile.ts); one not labelled, fenced off.
  if (!opts.fenceOffAll || fenced === null || leaderFence(pod, config, opts.lease) !== undefined) return null;
  return { change: { metadata: { annotations: fenced } }, demote: false };
}

/**
 * A peer labelled leader for this lease by a newer term than `fence` (the higher fence wins): the
 * name of the first, or null. A holder that still believes it leads must not label itself then.
 */
export function newerLeader(
  peers: Pod[],
  config: PublishConfig,
  lease: string,
  fence: number,
): string | null {
  const newer = peers.find((pod) => {
    const theirs = leaderFence(pod, config, lease);
    return theirs !== null && theirs !== undefined && theirs > fence;
  });
  return newer?.metadata?.name ?? null;
}

/**
 * The follower label, and the old term's fence and holder removed: a reader of the peer's
 * annotations (the downward API, kubectl) must not take the old fence for a current one. The
 * lease annotation stays as it is: it says which lease the pod competes for, not who leads.
 */
function demotion(config: PublishConfig): MetadataPatch & {
  metadata: { annotations: Record<string, string | null> };
} {
  return {
    metadata: {
      labels: { [config.roleLabel]: config.followerValue },
      annotations: { [config.fenceAnnotation]: null, [config.holderAnnotation]: null },
    },
  };
}

/**
 * A leader-labelled peer of this lease whose term is older than `fence` (or any, when `fence` is
 * null): a peer without a fence annotation is stale, one with a higher fence is a newer term.
 */
function isStaleLeader(pod: Pod, config: PublishConfig, lease: string, fence: number | null): boolean {
  if (pod.metadata?.name === config.podName) return false;
  const theirs = leaderFence(pod, config, lease);
  if (theirs === undefined) return false;
  return fence === null || theirs === null || theirs < fence;
}

/** undefined: not labelled leader for this lease; null: labelled, with no fence it can read. */
function leaderFence(pod: Pod, config: PublishConfig, lease: string): number | null | undefined {
  if (pod.metadata?.labels?.[config.roleLabel] !== config.leaderValue) return undefined;
  const annotations = pod.metadata?.annotations;
  const theirLease = annotations?.[config.leaseAnnotation];
  if (theirLease !== undefined && theirLease !== lease) return undefined;
  const fence = annotations?.[config.fenceAnnotation] ?? "";
  return /^\d{1,15}$/.test(fence) ? Number(fence) : null;
}
