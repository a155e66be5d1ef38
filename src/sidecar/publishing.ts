// The sidecar's pod publisher: started only in a cluster (the publisher is loaded on demand),
// showing "follower" before the first campaign.

import { UsageError } from "../config/options.ts";
import type { RunConfig } from "../config/run-config.ts";
import type { Pod } from "../kube/client/api-types.ts";
import type { LeadershipState } from "../kube/desired-state.ts";
import { PublishConfigError, validatePublishConfig } from "../kube/publish-config.ts";
import type { PodPublisher } from "../kube/publisher-contract.ts";
import type { SidecarMetrics } from "../observability/metrics.ts";
import type { Logger } from "../shared/logger.ts";

export interface PublisherWiring {
  config: RunConfig;
  log: Logger;
  metrics: SidecarMetrics;
  /** The pod shows its role: the start's publish, or a later one that landed. */
  onShown: () => void;
  /** Asked between listing peers and patching them: does this process still lead that term? */
  stillLeads: (term: LeadershipState) => boolean;
  /** Each version of this pod seen: the health gate's input. */
  onPod: (pod: Pod) => void;
  /** How many claims and renews of `term` succeeded (null: not this process's term): see PodPublisherOptions. */
  renewals: (term: LeadershipState) => number | null;
  /** Crash takeover: the peers, after each change the peer view takes in. */
  onPeers?: (peers: Pod[]) => void;
}

export async function startPublisher({
  config,
  log,
  metrics,
  onShown,
  stillLeads,
  onPod,
  renewals,
  onPeers,
}: PublisherWiring): Promise<PodPublisher | null> {
  const decision = config.publishing;
  if (!decision.enabled) {
    log.info(decision.reason);
    return null;
  }
  const validated = validatePublishConfig({
    namespace: decision.namespace,
    podName: decision.podName,
    // Without POD_UID (outside the chart) the publisher pins the uid of the pod as it first reads it.
    podUid: config.pod.uid ?? null,
    roleLabel: config.publish.roleLabel,
    conditionType: config.publish.conditionType,
    fenceAnnotation: config.publish.fenceAnnotation,
    holderAnnotation: config.publish.holderAnnotation,
    leaseAnnotation: config.publish.leaseAnnotation,
    clusterName: config.clusterName,
    // null opts out of peer demotion; undefined builds the selector from the pod's labels.
    peerSelector: config.publish.peerDemotion ? (config.publish.peerSelector ?? undefined) : null,
  });
  if ("problems" in validated) throw new Error(`pod publishing settings: ${validated.problems.join("; ")}`);
  const [{ createPodPublisher }, { loadKubeConnection }] = await Promise.all([
    import("../kube/pod-publisher.ts"),
    import("../kube/client/load-connection.ts"),
  ]);
  const publisher = createPodPublisher({
    connection: await loadKubeConnection(decision.source),
    config: validated.config,
    logger: log.child({ component: "publisher" }),
    onPatch: (e) => metrics.observePatch(e),
    onPublished: (e) => {
      onShown();
      metrics.observePublished(e);
    },
    stillLeads,
    onPod,
    renewals,
    ...(onPeers ? { onPeers } : {}),
  });
  const started = await publisher
    .start({ lease: config.publishLease, role: "follower", fence: null, holder: "" })
    .catch((error: unknown) => {
      // A setting the pod's labels cannot complete is the operator's to fix: exit 2, naming the flags.
      if (error instanceof PublishConfigError && error.field === "peerSelector") {
        throw new UsageError([
          `--peer-selector (PGLEASE_PEER_SELECTOR): ${error.message}; or run with --no-peer-demotion`,
        ]);
      }
      throw error;
    });
  if (started.missingPermissions.length > 0) {
    await publisher.stop();
    throw new Error(
      `the pod's service account lacks ${started.missingPermissions.join(", ")} in namespace ${decision.namespace}; ` +
        "grant them with the Role in charts/pglease or deploy/sidecar/rbac.yaml",
    );
  }
  if (started.published) onShown();
  else
    log.warn(
      "the pod did not show the follower role within the start timeout; publishing goes on in the background",
    );
  return publisher;
}
