// Whether this process can publish to its pod at all. Outside a cluster (a laptop, CI, the
// demo) there is no pod to patch: publishing is off and the sidecar says why, once.
// Free of the Kubernetes client (src/kube/client), so a process outside a cluster never loads it.

const { existsSync } = process.getBuiltinModule("node:fs");

export const SERVICE_ACCOUNT_TOKEN = "/var/run/secrets/kubernetes.io/serviceaccount/token";

export type PublishingDecision =
  | { enabled: true; namespace: string; podName: string; source: "in-cluster" | "kubeconfig" }
  | { enabled: false; reason: string };

export function decidePublishing(
  env: NodeJS.ProcessEnv = process.env,
  fileExists: (path: string) => boolean = existsSync,
): PublishingDecision {
  const podName = env.POD_NAME?.trim() ?? "";
  const namespace = env.POD_NAMESPACE?.trim() ?? "";
  const missing = [podName === "" ? "POD_NAME" : null, namespace === "" ? "POD_NAMESPACE" : null].filter(
    (name): name is string => name !== null,
  );
  if (missing.length > 0) {
    return {
      enabled: false,
      reason: `pod publishing is off: ${missing.join(" and ")} not set (set them from the downward API: fieldRef metadata.name / metadata.namespace)`,
    };
  }
  // The in-cluster connection needs both the mounted token and the service address the kubelet injects.
  if (env.KUBERNETES_SERVICE_HOST && fileExists(SERVICE_ACCOUNT_TOKEN)) {
    return { enabled: true, namespace, podName, source: "in-cluster" };
  }
  if (env.KUBECONFIG?.trim()) return { enabled: true, namespace, podName, source: "kubeconfig" };
  return {
    enabled: false,
    reason: `pod publishing is off: no in-cluster service account (${SERVICE_ACCOUNT_TOKEN} with KUBERNETES_SERVICE_HOST) and no KUBECONFIG`,
  };
}
