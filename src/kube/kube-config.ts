import { KubeConfig } from "@kubernetes/client-node";

export function loadKubeConfig(source: "in-cluster" | "kubeconfig"): KubeConfig {
  const kubeConfig = new KubeConfig();
  if (source === "in-cluster") kubeConfig.loadFromCluster();
  else kubeConfig.loadFromDefault();
  return kubeConfig;
}
