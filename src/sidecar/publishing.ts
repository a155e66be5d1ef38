// The sidecar's pod publisher: started only in a cluster (the Kubernetes client is loaded on
// demand, it is most of the start-up time), showing "follower" before the first campaign.
import type { Logger } from "pino";
import type { RunConfig } from "../config/run-config.ts";
import { validatePublishConfig } from "../kube/publish-config.ts";
import type { PodPublisher } from "../kube/publisher-contract.ts";
import type { SidecarMetrics } from "../observability/metrics.ts";

export async function startPublisher(
  config: RunConfig,
  log: Logger,
  metrics: SidecarMetrics,
  onShown: () => void,
): Promise<PodPublisher | null> {
  const decision = config.publishing;
  if (!decision.enabled) {
    log.info(decision.reason);
    return null;
  }
  const validated = validatePublishConfig({
    namespace: decision.namespace,
    podName: decision.podName,
    ...config.publish,
    peerSelector: config.publish.peerSelector ?? undefined,
  });
  if ("problems" in validated) throw new Error(`pod publishing settings: ${validated.problems.join("; ")}`);
  const [{ createPodPublisher }, { loadKubeConfig }] = await Promise.all([
    import("../kube/pod-publisher.ts"),
    import("../kube/kube-config.ts"),
  ]);
  const publisher = createPodPublisher({
    kubeConfig: loadKubeConfig(decision.source),
    config: validated.config,
    logger: log.child({ component: "publisher" }),
    onPatch: (e) => metrics.observePatch(e),
    onPublished: (e) => {
      onShown();
      metrics.observePublished(e);
    },
  });
  const started = await publisher.start({
    lease: config.publishLease,
    role: "follower",
    fence: null,
    holder: "",
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
