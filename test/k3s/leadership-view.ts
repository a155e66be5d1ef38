// What the cluster says about leadership, read the way an operator or kube-proxy sees it: the
// pods' role label, fence annotation and leader condition, and the ready endpoints behind the
// leader Service. A pod list is one consistent snapshot (one resourceVersion), so "two leaders in
// one view" is a real overlap, not an artefact of reading pods one by one.
import { CoreV1Api, DiscoveryV1Api, type KubeConfig, type V1Pod } from "@kubernetes/client-node";
import type { InstalledRelease } from "./pglease-release.ts";
import { pollUntil } from "./poll.ts";

const ROLE_LABEL = "pglease.io/role";
const FENCE_ANNOTATION = "pglease.io/fence";
const HOLDER_ANNOTATION = "pglease.io/holder";
const LEASE_ANNOTATION = "pglease.io/lease";
const LEADER_CONDITION = "pglease.io/leader";

export interface PodView {
  name: string;
  role: string | undefined;
  fence: string | undefined;
  holder: string | undefined;
  lease: string | undefined;
  /** Status of the pglease.io/leader condition: "True", "False", or undefined before the first publish. */
  leaderCondition: string | undefined;
  ready: boolean;
  terminating: boolean;
  /** The sidecar's container id in the node's runtime (without the "containerd://" prefix). */
  sidecarContainerId: string | undefined;
}

export interface ClusterView {
  pods: PodView[];
  /** Pods with a ready endpoint behind the leader Service, across all its EndpointSlices. */
  leaderEndpoints: string[];
}

export interface Settled {
  leader: PodView;
  followers: PodView[];
  /** The lease the pods publish (the key of its row), from the leader's annotation. */
  lease: string;
}

export function createLeadershipReader(kubeConfig: KubeConfig, release: InstalledRelease) {
  const core = kubeConfig.makeApiClient(CoreV1Api);
  const discovery = kubeConfig.makeApiClient(DiscoveryV1Api);
  const { namespace } = release;

  async function view(): Promise<ClusterView> {
    const [pods, slices] = await Promise.all([
      core.listNamespacedPod({ namespace, labelSelector: release.podSelector }),
      discovery.listNamespacedEndpointSlice({
        namespace,
        labelSelector: `kubernetes.io/service-name=${release.leaderServiceName}`,
      }),
    ]);
    const endpoints = new Set<string>();
    for (const slice of slices.items) {
      for (const endpoint of slice.endpoints ?? []) {
        if (endpoint.conditions?.ready && endpoint.targetRef?.name) endpoints.add(endpoint.targetRef.name);
      }
    }
    return {
      pods: pods.items.map((pod) => podView(pod, release.sidecarContainer)),
      leaderEndpoints: [...endpoints].sort(),
    };
  }

  return {
    view,

    /**
     * Polls the view until `accept` returns a value; on timeout the error shows the last view.
     * `at` is when the accepted view arrived (performance.now()), to measure from an earlier event.
     */
    async waitFor<T>(
      what: string,
      timeoutMs: number,
      accept: (view: ClusterView) => T | undefined,
    ): Promise<{ value: T; at: number }> {
      let last: ClusterView | undefined;
      return pollUntil(
        what,
        timeoutMs,
        async () => {
          last = await view();
          return accept(last);
        },
        () => (last ? describeView(last) : "nothing yet"),
      );
    },

    /** The pglease Events of one reason in the namespace: which pod, what it said. */
    async events(reason: string): Promise<{ pod: string | undefined; message: string }[]> {
      const list = await core.listNamespacedEvent({ namespace, fieldSelector: `reason=${reason}` });
      return list.items.map((event) => ({ pod: event.involvedObject.name, message: event.message ?? "" }));
    },

    async deletePod(name: string, gracePeriodSeconds?: number): Promise<void> {
      await core.deleteNamespacedPod({
        name,
        namespace,
        ...(gracePeriodSeconds === undefined ? {} : { gracePeriodSeconds }),
      });
    },

    /** The last lines each sidecar logged, for a failure report. */
    async sidecarLogs(tailLines = 25): Promise<string> {
      const pods = await core.listNamespacedPod({ namespace, labelSelector: release.podSelector });
      const parts = await Promise.all(
        pods.items.map(async (pod) => {
          const name = pod.metadata?.name ?? "?";
          const log = await core
            .readNamespacedPodLog({ name, namespace, container: release.sidecarContainer, tailLines })
            .catch((error: unknown) => `(no log: ${error instanceof Error ? error.message : String(error)})`);
          return `--- ${name} (${release.sidecarContainer})\n${log}`;
        }),
      );
      return parts.join("\n");
    },
  };
}

export type LeadershipReader = ReturnType<typeof createLeadershipReader>;

/**
 * The steady state the chart promises: `replicas` ready pods, exactly one labelled leader and the
 * rest follower, the condition agreeing with the label on every pod, a numeric fence on the
 * leader, and the leader Service routing to the leader alone. Undefined until then.
 */
export function settledLeadership(view: ClusterView, replicas: number): Settled | undefined {
  const pods = view.pods;
  if (pods.length !== replicas || pods.some((pod) => pod.terminating || !pod.ready)) return undefined;
  const leaders = pods.filter((pod) => pod.role === "leader");
  const followers = pods.filter((pod) => pod.role === "follower");
  const leader = leaders[0];
  if (!leader || leaders.length !== 1 || followers.length !== replicas - 1) return undefined;
  if (leader.leaderCondition !== "True" || followers.some((pod) => pod.leaderCondition !== "False"))
    return undefined;
  if (!/^\d+$/.test(leader.fence ?? "") || !leader.holder || !leader.lease) return undefined;
  if (view.leaderEndpoints.length !== 1 || view.leaderEndpoints[0] !== leader.name) return undefined;
  return { leader, followers, lease: leader.lease };
}

export function describeView(view: ClusterView): string {
  const pods = view.pods.map(
    (pod) =>
      `${pod.name}(role=${pod.role ?? "-"} fence=${pod.fence ?? "-"} condition=${pod.leaderCondition ?? "-"}` +
      `${pod.ready ? " ready" : ""}${pod.terminating ? " terminating" : ""})`,
  );
  return `pods [${pods.join(", ")}]; leader Service endpoints [${view.leaderEndpoints.join(", ")}]`;
}

function podView(pod: V1Pod, sidecarContainer: string): PodView {
  const labels = pod.metadata?.labels ?? {};
  const annotations = pod.metadata?.annotations ?? {};
  const conditions = pod.status?.conditions ?? [];
  // A native sidecar is an init container; a classic one a regular container.
  const statuses = [...(pod.status?.initContainerStatuses ?? []), ...(pod.status?.containerStatuses ?? [])];
  return {
    name: pod.metadata?.name ?? "",
    role: labels[ROLE_LABEL],
    fence: annotations[FENCE_ANNOTATION],
    holder: annotations[HOLDER_ANNOTATION],
    lease: annotations[LEASE_ANNOTATION],
    leaderCondition: conditions.find((c) => c.type === LEADER_CONDITION)?.status,
    ready: conditions.some((c) => c.type === "Ready" && c.status === "True"),
    terminating: pod.metadata?.deletionTimestamp !== undefined,
    sidecarContainerId: statuses
      .find((s) => s.name === sidecarContainer)
      ?.containerID?.replace(/^[a-z]+:\/\//, ""),
  };
}
