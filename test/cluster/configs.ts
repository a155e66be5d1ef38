// The components' configuration files. The settings this machine kind needs, each measured:
// - cgroup v1 only: the kubelet refuses it unless failCgroupV1 is false; cgroup driver cgroupfs.
// - no CAP_SYS_RESOURCE in the bounding set: runc cannot lower oom_score_adj for the sandbox,
//   so containerd's CRI restricts it (restrict_oom_score_adj).
// - no registry: the sandbox image is a local one, imported into containerd beforehand.
import { writeFile } from "node:fs/promises";
import { join } from "node:path";
import { NODE_IP, NODE_NAME, POD_CIDR, POD_GATEWAY, paths } from "./layout.ts";
import { kubeconfigFor, pki } from "./pki.ts";

export const PAUSE_IMAGE = "localhost/pglease/pause:3.10";
export const CNI_BIN_DIR = "/usr/lib/cni";
export const RUNC = "/usr/sbin/runc";

export const configFiles = {
  containerd: join(paths.config, "containerd.toml"),
  kubelet: join(paths.config, "kubelet.yaml"),
  kubeProxy: join(paths.config, "kube-proxy.yaml"),
  resolvConf: join(paths.config, "resolv.conf"),
  cni: join(paths.cniConf, "10-pglease.conflist"),
  auditPolicy: join(paths.config, "audit-policy.yaml"),
};

/**
 * PGLEASE_CLUSTER_AUDIT=1: the API server writes an audit log of every request on pods and
 * EndpointSlices (who, verb, object, when received, when answered, the status) to
 * logs/kube-apiserver-audit.log, so a handover can be read step by step on the host's clock.
 */
export const auditLog =
  process.env.PGLEASE_CLUSTER_AUDIT === "1" ? join(paths.logs, "kube-apiserver-audit.log") : null;

export async function writeConfigs(): Promise<void> {
  await Promise.all([
    writeFile(configFiles.containerd, containerdConfig()),
    writeFile(configFiles.kubelet, kubeletConfig()),
    writeFile(configFiles.kubeProxy, kubeProxyConfig()),
    // Pods get no name server: nothing in the suites resolves names, and none may be asked outside.
    writeFile(configFiles.resolvConf, "# pglease cluster: no name server\n"),
    writeFile(configFiles.cni, JSON.stringify(cniConfig(), null, 2)),
    ...(auditLog ? [writeFile(configFiles.auditPolicy, AUDIT_POLICY)] : []),
  ]);
}

// Metadata only (no bodies), and no RequestReceived stage: one line per request, with both times.
const AUDIT_POLICY = `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: ["RequestReceived"]
rules:
  - level: Metadata
    resources:
      - group: ""
        resources: ["pods", "pods/status"]
      - group: "discovery.k8s.io"
        resources: ["endpointslices"]
  - level: None
`;

function containerdConfig(): string {
  const c = paths.containerd;
  return `version = 3
root = "${join(c, "root")}"
state = "${join(c, "state")}"

[grpc]
  address = "${paths.containerdSocket}"

[ttrpc]
  address = "${join(c, "containerd.sock.ttrpc")}"

[plugins."io.containerd.cri.v1.images"]
  snapshotter = "overlayfs"
  [plugins."io.containerd.cri.v1.images".pinned_images]
    sandbox = "${PAUSE_IMAGE}"

[plugins."io.containerd.cri.v1.runtime"]
  restrict_oom_score_adj = true
  # Pod network namespaces under the state directory, so teardown finds them all there.
  netns_mounts_under_state_dir = true
  [plugins."io.containerd.cri.v1.runtime".containerd]
    default_runtime_name = "runc"
    [plugins."io.containerd.cri.v1.runtime".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.cri.v1.runtime".containerd.runtimes.runc.options]
        BinaryName = "${RUNC}"
        # runc's state beside containerd's, not in /run/containerd/runc: teardown removes it.
        Root = "${join(paths.containerd, "runc")}"
        SystemdCgroup = false
  [plugins."io.containerd.cri.v1.runtime".cni]
    bin_dirs = ["${CNI_BIN_DIR}"]
    conf_dir = "${paths.cniConf}"
    max_conf_num = 1
`;
}

function cniConfig() {
  return {
    cniVersion: "1.0.0",
    name: "pglease",
    plugins: [
      {
        type: "bridge",
        bridge: "cni0",
        isGateway: true,
        // No masquerade: nothing leaves the node, and the host routes the pod range back to it.
        ipMasq: false,
        // A pod reaching itself through a Service (kube-proxy picks the pod that sent).
        hairpinMode: true,
        ipam: {
          type: "host-local",
          ranges: [[{ subnet: POD_CIDR, gateway: POD_GATEWAY }]],
          // The pods' default route is the node: Services, the node and the host's end of its
          // link are reached through it; the node itself has no route further.
          routes: [{ dst: "0.0.0.0/0" }],
          dataDir: paths.cniData,
        },
      },
    ],
  };
}

function kubeletConfig(): string {
  return `apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
failCgroupV1: false
cgroupDriver: cgroupfs
containerRuntimeEndpoint: unix://${paths.containerdSocket}
address: ${NODE_IP}
authentication:
  anonymous:
    enabled: false
  webhook:
    enabled: true
  x509:
    clientCAFile: ${pki.caCert}
authorization:
  mode: Webhook
clusterDomain: cluster.local
resolvConf: ${configFiles.resolvConf}
failSwapOn: false
rotateCertificates: false
serializeImagePulls: false
maxPods: 40
# The host's disk is shared: evict only when it is really full, never collect the imported images.
evictionHard:
  memory.available: 100Mi
  nodefs.available: 1%
  nodefs.inodesFree: 1%
  imagefs.available: 1%
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
`;
}

function kubeProxyConfig(): string {
  return `apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
mode: iptables
hostnameOverride: ${NODE_NAME}
clusterCIDR: ${POD_CIDR}
clientConnection:
  kubeconfig: ${kubeconfigFor("proxy")}
# Leave the host's conntrack table size alone (it is not the node namespace's to change).
conntrack:
  maxPerCore: 0
  min: 0
metricsBindAddress: 127.0.0.1:10249
healthzBindAddress: 127.0.0.1:10256
`;
}
