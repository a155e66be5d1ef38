// The connection to the API server that the sidecar opens: the pod's service account (in-cluster)
// or KUBECONFIG's current context, whichever kube/environment.ts found.
import type { KubeConnection } from "./connection.ts";
import { inClusterConnection } from "./in-cluster.ts";
import { kubeconfigConnection } from "./kubeconfig.ts";

export function loadKubeConnection(source: "in-cluster" | "kubeconfig"): Promise<KubeConnection> {
  return source === "in-cluster" ? Promise.resolve(inClusterConnection()) : kubeconfigConnection();
}
