// One pass of the publisher towards the newest desired state, in the order that keeps "gap,
// never overlap": read the pod if it may be stale; as a leader, demote stale peers and check
// that this process still leads; then patch labels and annotations, then the condition. A
// pass that a newer desired state overtakes stops early: the worker starts a fresh one.
// Across clusters a new leader reaches only its own cluster's API server, so a follower that
// learns the lease is held in another cluster demotes its own cluster's stale leaders in the same
// pass; a failed pass is retried like any other, so a cluster whose API server was away repairs
// its labels when it answers again.

import type { Logger } from "pino";
import type { Pod } from "./client/api-types.ts";
import {
  conditionPatch,
  heldInAnotherCluster,
  type LeadershipState,
  metadataPatch,
} from "./desired-state.ts";
import { demoteStalePeers } from "./peer-demotion.ts";
import type { PodApi } from "./pod-api.ts";
import { ROLE } from "./pod-contract.ts";
import { type PublishConfig, peerSelectorFor } from "./publish-config.ts";
import type { PatchObservation } from "./publisher-contract.ts";
import { type PublisherState, podShowsDesired, termKey } from "./publisher-state.ts";

export interface ReconcileContext {
  api: PodApi;
  config: PublishConfig;
  logger: Logger;
  wallClock: () => Date;
  stopSignal: AbortSignal;
  /** The caller's word that `term` is still this process's current term. */
  stillLeads: (term: LeadershipState) => boolean;
  /** Records a pod the API server answered with. */
  seen: (pod: Pod) => void;
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
  if (!target) return;
  const superseded = () => state.desired?.generation !== target.generation || ctx.stopSignal.aborted;
  if (state.podStale || !state.pod) {
    state.podStale = false;
    ctx.seen(await ctx.api.readPod());
  }
  if (target.state.role === ROLE.leader) {
    const leads = () => !superseded() && ctx.stillLeads(target.state);
    if (leads()) await clearStalePeers(state, ctx, target.state, termKey(target.state), leads);
    if (superseded()) return;
    if (!ctx.stillLeads(target.state)) throw new NoLongerLeads(target.state);
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
  const labels = metadataPatch(target.pod, state.pod);
  if (labels) {
    ctx.seen(await ctx.observe("metadata", () => ctx.api.patchMetadata(ctx.config.podName, labels)));
  }
  if (superseded()) return;
  const condition = conditionPatch(target.pod, state.pod, ctx.wallClock());
  if (condition) {
    ctx.seen(await ctx.observe("status", () => ctx.api.patchStatus(ctx.config.podName, condition)));
  }
  // Without this a server that answers patches but never reflects them would spin the loop.
  if (!superseded() && !podShowsDesired(state)) throw new Error("the pod does not show the patched state");
}

/**
 * Demotes the stale peers of `term` once per `key` (a term of this pod, or a holder in another
 * cluster) while `valid()` holds; throws PublishConfigError when peers cannot be found.
 */
async function clearStalePeers(
  state: PublisherState,
  ctx: ReconcileContext,
  term: LeadershipState,
  key: string,
  valid: () => boolean,
): Promise<void> {
  if (state.peersClearedFor === key) return;
  const peerSelector = peerSelectorFor(ctx.config, state.pod?.metadata?.labels);
  if (peerSelector !== null) {
    const result = await demoteStalePeers({
      api: ctx.api,
      config: ctx.config,
      peerSelector,
      lease: term.lease,
      wallClock: ctx.wallClock,
      stillLeads: valid,
      observe: (run) => ctx.observe("peer", run),
    });
    if (result.demoted.length > 0) {
      // `holder` in a sidecar's lines is its own identity (its logger's binding): the lease's goes under `leader`.
      ctx.logger.warn(
        { pods: result.demoted, ...(term.role === ROLE.leader ? {} : { leader: term.holder }) },
        term.role === ROLE.leader
          ? "took a stale leader label off other pods"
          : "the lease is held in another cluster: took a stale leader label off pods of this cluster",
      );
    }
    if (result.stoppedEarly) return;
  }
  state.peersClearedFor = key;
}
