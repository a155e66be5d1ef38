// One pass of the publisher towards the newest desired state, in the order that keeps "gap,
// never overlap": read the pod if it may be stale; as a leader, demote stale peers and check
// that this process still leads; then patch labels and annotations, then the condition. A
// pass that a newer desired state overtakes stops early: the worker starts a fresh one.
// The higher fence wins: a leader whose peer view shows a peer labelled leader by an older term
// demotes it on every pass (the view wakes the worker), and one that sees a peer labelled by a
// newer term does not label itself (its own term has ended on the server; it learns so soon).
// Across clusters a new leader reaches only its own cluster's API server, so a follower that
// learns the lease is held in another cluster demotes its own cluster's stale leaders in the same
// pass; a failed pass is retried like any other, so a cluster whose API server was away repairs
// its labels when it answers again.
// A leader's own label is guarded (guarded-patch.ts): a term whose pod a newer term fenced off
// never labels it, and a label still on its way when that happens is refused by the API server.
// Every read and patch is of this process's own pod, the one uid it pinned: a pod recreated under
// its name (a force-deleted StatefulSet pod's next incarnation) is another pod, and once its own
// is gone a pass does nothing (pod-publisher.ts says why).

import type { Logger } from "../shared/logger.ts";
import { POD_CONTRACT, ROLE } from "../shared/pod-contract.ts";
import type { Pod } from "./client/api-types.ts";
import {
  conditionPatch,
  heldInAnotherCluster,
  type LeadershipState,
  type MetadataPatch,
  metadataPatch,
} from "./desired-state.ts";
import { guardedPatch, supersededBy } from "./guarded-patch.ts";
import { demoteStalePeers, leaderSelector, newerLeader } from "./peer-demotion.ts";
import { KubeRequestError, type PodApi, type PodRef } from "./pod-api.ts";
import { type PublishConfig, peerSelectorFor } from "./publish-config.ts";
import type { PatchObservation } from "./publisher-contract.ts";
import { isOlder, type PublisherState, podShowsDesired, termKey } from "./publisher-state.ts";

export interface ReconcileContext {
  api: PodApi;
  config: PublishConfig;
  logger: Logger;
  wallClock: () => Date;
  stopSignal: AbortSignal;
  /** The caller's word that `term` is still this process's current term. */
  stillLeads: (term: LeadershipState) => boolean;
  /** How many claims and renews of `term` succeeded so far (PodPublisherOptions.renewals); null: unknown. */
  renewals: (term: LeadershipState) => number | null;
  /** Records a pod the API server answered with; one with another uid ends this pod (gone). */
  seen: (pod: Pod) => void;
  /** This process's pod no longer exists: nothing more is published. */
  gone: (why: string) => void;
  /** The peers a healthy watch of `selector` shows, or null: then they are listed. */
  peers: (selector: string) => Pod[] | null;
  /** Records a peer the API server answered with. */
  peerSeen: (pod: Pod) => void;
  /** Times and counts one patch. */
  observe: <T>(target: PatchObservation["target"], run: () => Promise<T>) => Promise<T>;
}

/** The desired state says leader, but the caller says this process no longer leads that term. */
export class NoLongerLeads extends Error {
  constructor(term: LeadershipState) {
    super(
      `this process no longer leads lease ${term.lease} (fence ${term.fence}): not labelling the pod leader, waiting for its new state`,
    );
    this.name = "NoLongerLeads";
  }
}

export async function reconcile(state: PublisherState, ctx: ReconcileContext): Promise<void> {
  const target = state.desired;
  // Held: this pod is being deleted and the new leader demotes it; demote() ends the hold.
  if (!target || state.gone !== null || state.held) return;
  const superseded = () =>
    state.desired?.generation !== target.generation || ctx.stopSignal.aborted || state.gone !== null;
  if (state.podStale || !state.pod) {
    state.podStale = false;
    await readOwnPod(state, ctx);
    if (superseded()) return;
  }
  // Set when a superseded-by annotation at or above this term's fence is proven stale (see staleFenceProven).
  let replaceStale: number | null = null;
  if (target.state.role === ROLE.leader) {
    const leads = () => !superseded() && ctx.stillLeads(target.state);
    const key = termKey(target.state);
    const newer = leads() ? await clearStalePeers(state, ctx, target.state, key, leads) : null;
    if (superseded()) return;
    if (!ctx.stillLeads(target.state)) throw new NoLongerLeads(target.state);
    if (newer !== null) return yieldTo(state, ctx, target.state, newer);
    const fencedBy = supersededBy(state.pod);
    if (fencedBy !== null && target.state.fence !== null && fencedBy >= target.state.fence) {
      if (!staleFenceProven(state, ctx, target.state, fencedBy)) {
        fencedOff(state, ctx, target.state, fencedBy);
        // With a renew count a later renew may prove the annotation stale: the pass is tried again.
        if (ctx.renewals(target.state) !== null) throw new AwaitingRenew(target.state, fencedBy);
        return;
      }
      replaceStale = target.state.fence;
    }
  } else if (heldInAnotherCluster(target.state, ctx.config)) {
    // A newer desired state (this pod leads, or the holder moved) ends what this pass knows.
    const elsewhere = () => !superseded();
    await clearStalePeers(
      state,
      ctx,
      target.state,
      `${target.state.lease}@${target.state.holder}`,
      elsewhere,
    );
  }
  if (superseded()) return;
  // Labels and condition are two requests that say the same thing: sent together, a handover waits
  // for one round trip, not two (a demotion before the release, the new leader's label after it).
  const labels = withFence(metadataPatch(target.pod, state.pod), replaceStale);
  const condition = conditionPatch(target.pod, state.pod, ctx.wallClock());
  const own: PodRef = { name: ctx.config.podName, uid: state.uid ?? undefined };
  // Only a leader's labels need the guard: a follower's patch takes a label off, always safe.
  const sendLabels =
    labels === null
      ? null
      : target.state.role === ROLE.leader
        ? () => ctx.api.patchMetadataGuarded(own, guardedPatch(state.pod, labels, SELF_LABEL_GUARDS))
        : () => ctx.api.patchMetadata(own, labels);
  const answers = await Promise.all([
    sendLabels && ctx.observe("metadata", sendLabels),
    condition && ctx.observe("status", () => ctx.api.patchStatus(own, condition)),
  ]).catch((error: unknown) => {
    // Refused: the pod was fenced off (or changed) since it was read; the next pass reads it.
    if (error instanceof KubeRequestError && error.status === 422) state.podStale = true;
    throw error;
  });
  // The later version carries both changes, whichever answer came back first.
  for (const pod of answers.filter((a): a is Pod => !!a).sort(byVersion)) ctx.seen(pod);
  // Without this a server that answers patches but never reflects them would spin the loop.
  if (!superseded() && !podShowsDesired(state)) throw new Error("the pod does not show the patched state");
}

/**
 * Reads this process's pod by name. Once its uid is known a 404 is the end of that pod, as is a pod
 * of the name with another uid (ctx.seen): a uid is never reused. Before, a 404 is retried.
 */
async function readOwnPod(state: PublisherState, ctx: ReconcileContext): Promise<void> {
  try {
    ctx.seen(await ctx.api.readPod());
  } catch (error) {
    if (!(error instanceof KubeRequestError && error.kind === "not-found") || state.uid === null) throw error;
    ctx.gone(`pod ${ctx.config.podName} (uid ${state.uid}) no longer exists`);
  }
}

/**
 * Demotes the stale peers of `term` while `valid()` holds: once per `key` (a term of this pod, or
 * a holder in another cluster) from a list, or on every pass of a leader whose peer view is
 * healthy. Returns a peer labelled leader by a newer term, or null; throws PublishConfigError
 * when peers cannot be found.
 */
async function clearStalePeers(
  state: PublisherState,
  ctx: ReconcileContext,
  term: LeadershipState,
  key: string,
  valid: () => boolean,
): Promise<string | null> {
  const peerSelector = peerSelectorFor(ctx.config, state.pod?.metadata?.labels);
  if (peerSelector === null) {
    state.peersClearedFor = key;
    return null;
  }
  const watched = ctx.peers(peerSelector);
  // A follower's view of another cluster's holder may lag its own cluster's new leader: once only.
  const everyPass = watched !== null && term.fence !== null;
  if (state.peersClearedFor === key && !everyPass) return null;
  const again = state.peersClearedFor === key;
  // A leader's term fences off every peer in its first pass, labelled or not.
  const fenceOffAll = !again && term.role === ROLE.leader && term.fence !== null;
  const selector = fenceOffAll ? peerSelector : leaderSelector(ctx.config, peerSelector);
  // A term's first pass lists its peers from the API server, never from the watch: a list without
  // a resourceVersion is a quorum read, so it has every pod that could carry an older term's label
  // (a lagging watch may not have the pod at all, and an unseen pod is never fenced off). A stopping
  // leader releases without waiting for its own demotion because this list and its patches come first.
  const list = async () => (await ctx.api.listSelected(selector)).items;
  let peers = (fenceOffAll ? null : watched) ?? (await list());
  const demote = (pods: Pod[]) =>
    demoteStalePeers({
      api: ctx.api,
      config: ctx.config,
      peers: pods,
      lease: term.lease,
      // A term's first pass takes every other leader label off, as the contract says; later passes
      // only an older term's, so a peer of a newer term is left to win (see yieldTo).
      fence: again ? term.fence : null,
      term: term.role === ROLE.leader ? term.fence : null,
      fenceOffAll,
      wallClock: ctx.wallClock,
      stillLeads: valid,
      observe: (run) => ctx.observe("peer", run),
      demotedPod: ctx.peerSeen,
    });
  let result: Awaited<ReturnType<typeof demoteStalePeers>>;
  try {
    result = await demote(peers);
  } catch (error) {
    // A peer changed between the list and its guarded patch: one seen not leading labelled itself
    // meanwhile, or another term fenced it off (the stopping leader's own demotion no longer
    // conflicts: a demotion is not guarded on the label, peer-demotion.ts). Listed again at once
    // (not after the worker's backoff), once: a second refusal fails the pass as any failure does.
    if (!fenceOffAll || !(error instanceof KubeRequestError && error.status === 422)) throw error;
    peers = await list();
    result = await demote(peers);
  }
  if (result.demoted.length > 0) {
    // `holder` in a sidecar's lines is its own identity (its logger's binding): the lease's goes under `leader`.
    ctx.logger.warn(
      {
        pods: result.demoted,
        ...(term.role === ROLE.leader ? { fence: term.fence } : { leader: term.holder }),
        ...(again ? { again: true } : {}),
      },
      term.role === ROLE.leader
        ? "took a stale leader label off other pods"
        : "the lease is held in another cluster: took a stale leader label off pods of this cluster",
    );
  }
  if (!result.stoppedEarly) state.peersClearedFor = key;
  if (term.fence === null) return null;
  const left = peers.filter((pod) => !result.demoted.includes(pod.metadata?.name as string));
  return newerLeader(left, ctx.config, term.lease, term.fence);
}

/** Leaves the leader label to a peer of a newer term, saying so once per term and peer. */
function yieldTo(state: PublisherState, ctx: ReconcileContext, term: LeadershipState, peer: string): void {
  const said = `${termKey(term)}>${peer}`;
  if (state.yieldedFor === said) return;
  state.yieldedFor = said;
  ctx.logger.warn(
    { fence: term.fence, pod: peer },
    "a peer is labelled leader by a newer term (higher fence): not labelling this pod leader while this process still believes it leads",
  );
}

/** The self-label applies only while nobody fenced this pod off since it was read. */
const SELF_LABEL_GUARDS = { annotations: [POD_CONTRACT.supersededAnnotation] };

/** Leaves this pod unlabelled: a newer term fenced it off, so this term has ended on the server. */
function fencedOff(state: PublisherState, ctx: ReconcileContext, term: LeadershipState, by: number): void {
  const said = `${termKey(term)}>superseded-by:${by}`;
  if (state.yieldedFor === said) return;
  state.yieldedFor = said;
  ctx.logger.warn(
    { fence: term.fence, supersededBy: by },
    "a newer term fenced this pod off (its superseded-by annotation): not labelling it leader while this process still believes it leads",
  );
}

/** The pass waits for a renew of its term that would prove the pod's superseded-by annotation stale. */
export class AwaitingRenew extends Error {
  constructor(term: LeadershipState, by: number) {
    super(
      `the pod's superseded-by annotation (${by}) is at or above this term's fence ${term.fence} of lease ${term.lease}: not labelling it leader unless a renew of this term proves it stale`,
    );
    this.name = "AwaitingRenew";
  }
}

/**
 * Whether the superseded-by annotation `by` (>= the fence f of `term`) on this pod is stale: left by
 * another era of the fence sequence (a new database or lease table, a restore, a failover that lost
 * sequence values) or by another lease's term, not by a newer term of this lease. It is once a claim
 * or renew of term f succeeds after this process read `by`: every newer claim of the lease changes
 * the row's fence, and a newer term writes its fence here only after its claim, so had `by` come
 * from a newer term, that claim came before the read, and the renew of f after the read would
 * have matched no row. A renew sent before the read and answered after it proves the same: a newer
 * claim between its execution and the read needs the lease to expire first, a ttl later, and the
 * elector refuses an answer received after its local deadline (send + ttl − margin). The count is
 * recorded at the first pass that sees `by`, at or after the read, so it can only be too high
 * (costing one more renew), never too low. A late self-label of an old term after a pause stays
 * refused: its renew fails once the newer term claimed, so it never proves the newer fence stale.
 */
function staleFenceProven(
  state: PublisherState,
  ctx: ReconcileContext,
  term: LeadershipState,
  by: number,
): boolean {
  const renewals = ctx.renewals(term);
  if (renewals === null) return false;
  const key = `${termKey(term)}@${by}`;
  if (state.fenceRead?.key !== key) {
    state.fenceRead = { key, renewals };
    return false;
  }
  return renewals > state.fenceRead.renewals;
}

/**
 * `labels` that also replace a stale superseded-by annotation with `fence` − 1: terms before this
 * one stay fenced off, this one is not. The self-label's guard tests the stale value as read.
 */
function withFence(labels: MetadataPatch | null, fence: number | null): MetadataPatch | null {
  if (fence === null || labels === null) return labels;
  const annotations = {
    ...labels.metadata.annotations,
    [POD_CONTRACT.supersededAnnotation]: String(fence - 1),
  };
  return { metadata: { ...labels.metadata, annotations } };
}

/** Oldest first, by resourceVersion. */
const byVersion = (a: Pod, b: Pod) => (isOlder(a, b) ? -1 : isOlder(b, a) ? 1 : 0);
