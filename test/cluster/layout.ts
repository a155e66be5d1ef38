// Where the single-node cluster lives and which addresses it uses. Every address is in
// 10.213.0.0/16, which the host's guard (network.ts) drops on any interface but the node's link:
// nothing of the cluster's can leave the machine.
import { join } from "node:path";

/** The network namespace the node runs in: containerd, kubelet, kube-proxy, the control plane. */
export const NETNS = "pglease-node";
export const NODE_NAME = "pglease-node";

/** Everything the guard drops on the way out. */
export const CLUSTER_RANGE = "10.213.0.0/16";
/** Pods (the CNI bridge's host-local range, and kube-proxy's cluster CIDR). */
export const POD_CIDR = "10.213.0.0/24";
export const POD_GATEWAY = "10.213.0.1";
export const SERVICE_CIDR = "10.213.128.0/24";
/** The `kubernetes` Service's ClusterIP: the first address of the Service range. */
export const KUBERNETES_SERVICE_IP = "10.213.128.1";
/** The veth pair between the host and the node: a /30, and no default route on the node's side. */
export const HOST_LINK = "pgl-host";
export const HOST_IP = "10.213.255.1";
export const NODE_LINK = "pgl-node";
export const NODE_IP = "10.213.255.2";
export const LINK_PREFIX = 30;
export const API_PORT = 6443;
export const API_SERVER = `https://${NODE_IP}:${API_PORT}`;

/** The host's iptables chain (mangle table) that counts and drops cluster traffic leaving the machine. */
export const GUARD_CHAIN = "PGLEASE-CLUSTER-GUARD";

/** Host settings the kubelet and kube-proxy may change; `down` puts back what `up` found. */
export const HOST_SYSCTLS = [
  "vm.overcommit_memory",
  "vm.panic_on_oom",
  "kernel.panic",
  "kernel.panic_on_oops",
  "kernel.keys.root_maxkeys",
  "kernel.keys.root_maxbytes",
  "net.ipv4.ip_forward",
  "net.bridge.bridge-nf-call-iptables",
  "net.netfilter.nf_conntrack_max",
];

/**
 * Host paths the components write to whatever their configuration says (the kubelet's container
 * logs, the CNI result cache, containerd's shim sockets). `down` removes those `up` did not find.
 */
export const HOST_PATHS = ["/var/log/pods", "/var/log/containers", "/var/lib/cni", "/run/containerd"];

export const BASE = process.env.PGLEASE_CLUSTER_DIR ?? "/var/lib/pglease-cluster";

export const paths = {
  base: BASE,
  state: join(BASE, "state.json"),
  pki: join(BASE, "pki"),
  config: join(BASE, "config"),
  logs: join(BASE, "logs"),
  apiserver: join(BASE, "apiserver"),
  containerd: join(BASE, "containerd"),
  containerdSocket: join(BASE, "containerd", "containerd.sock"),
  kubelet: join(BASE, "kubelet"),
  cniConf: join(BASE, "cni", "net.d"),
  cniData: join(BASE, "cni", "ipam"),
  /** The admin kubeconfig (system:masters), for kubectl and helm on the host. */
  adminKubeconfig: join(BASE, "config", "admin.kubeconfig"),
};

export const COMPONENTS = [
  "containerd",
  "kube-apiserver",
  "kube-controller-manager",
  "kube-scheduler",
  "kubelet",
  "kube-proxy",
] as const;
export type Component = (typeof COMPONENTS)[number];

export const logFile = (component: Component) => join(paths.logs, `${component}.log`);
