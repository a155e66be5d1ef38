// The cluster suites' pod timeline (pod-timeline.ts), on the API servers of the Kubernetes suites:
// once watchPods has resolved, every pod that existed before is in it. Found in the real cluster:
// the watch's initial ADDED events (one per existing pod) kept arriving after it had resolved, so
// a pod labelled leader before a sidecar kill showed up stamped after the kill, and the install
// suite counted it as a second new leader ("two pods took the label in turn") where the lease
// history had one change of hands.
import { afterEach, expect, it } from "vitest";
import { onEachKubeServer } from "../support/kube/kube-server-suites.ts";
import type { TestKube } from "../support/kube/kube-servers.ts";
import type { ApiEndpoint } from "./api.ts";
import { watchPods } from "./pod-timeline.ts";

const NAMESPACE = "timeline";
const SELECTOR = "app=timeline";
// Enough bytes that the initial events cannot all come in one read of the socket.
const PODS = 40;
const PADDING = "x".repeat(10_000);

let kube: TestKube | undefined;
afterEach(async () => {
  await kube?.close();
  kube = undefined;
});

async function endpointOf(server: TestKube): Promise<ApiEndpoint> {
  const config = server.kubeConfig({ namespace: NAMESPACE });
  const options = {};
  await config.applyToHTTPSOptions(options);
  return { url: config.getCurrentCluster()?.server ?? "", options };
}

const pod = (
  name: string,
  labels: Record<string, string> = {},
  annotations: Record<string, string> = {},
) => ({
  metadata: {
    name,
    namespace: NAMESPACE,
    labels: { app: "timeline", ...labels },
    annotations: { padding: PADDING, ...annotations },
  },
  spec: { containers: [{ name: "app", image: "app" }] },
});

await onEachKubeServer("cluster suites' pod timeline", (server) => {
  it("holds every existing pod once it resolves, and reports none of them as a new leader", async () => {
    kube = await server.start({ namespace: NAMESPACE });
    for (let i = 0; i < PODS; i++) await kube.seedPod(pod(`follower-${String(i).padStart(2, "0")}`));
    await kube.seedPod(pod("leader", { "pglease.io/role": "leader" }, { "pglease.io/fence": "7" }));

    const timeline = await watchPods(NAMESPACE, SELECTOR, await endpointOf(kube));
    try {
      const startedAt = performance.now();
      expect(timeline.current()).toHaveLength(PODS + 1);
      // A change after the start comes after every initial event: from then on the watch is caught up.
      await kube.mutatePod(NAMESPACE, "follower-00", (p) => {
        p.metadata = { ...p.metadata, annotations: { ...p.metadata?.annotations, touched: "yes" } };
      });
      await timeline.waitFor(
        () => timeline.events.some((e) => e.pod.name === "follower-00" && e.atMs > startedAt),
        30_000,
      );
      expect(timeline.newLeaders(startedAt)).toEqual([]);
    } finally {
      timeline.stop();
    }
  });
});
