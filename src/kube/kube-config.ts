import type { KubeConnection } from "./client/connection.ts";
import { inClusterConnection } from "./client/in-cluster.ts";
import { kubeconfigConnection } from "./client/kubeconfig.ts";

export function loadKubeConnection(source: "in-cluster" | "kubeconfig"): Promise<KubeConnection> {
  return source === "in-cluster" ? Promise.resolve(inClusterConnection()) : kubeconfigConnection();
}
