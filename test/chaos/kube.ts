// The chaos run's API server. The real kube-apiserver (built by scripts/build-kube-apiserver.sh)
// when it is there: the chart's ServiceAccount, Role and RoleBinding, one token per pod bound to
// that pod (as the kubelet mounts it), the pods created and reported Running as the kubelet would,
// and the API faults made by the recording fault proxy in front of it (real-kube-proxy.ts).
// Otherwise the in-process server, saying why; it makes the same faults through its own hooks.
import { readFile } from "node:fs/promises";
import type { V1Pod } from "@kubernetes/client-node";
import { CoreV1Api, type KubeConfig } from "@kubernetes/client-node";
import { type FaultControl, startKubeApiServer } from "../support/kube/apiserver/index.ts";
import { kubeTools } from "../support/kube/chart.ts";
import type { ContainerReport } from "../support/kube/kubelet-status.ts";
import { realKubeApiServerAvailable, startRealKubeApiServer } from "../support/kube/real-kube-apiserver.ts";
import { createRunningPod, installChartRbac, mutateRealPod } from "../support/kube/real-kube-cluster.ts";
import { startKubeProxy } from "../support/kube/real-kube-proxy.ts";
import { CHAOS_POD_SPEC, setAppReady, setSidecarStatus } from "./app-status.ts";
import { type LabelWatch, watchRoleLabels } from "./label-watch.ts";

export type ApiServerChoice = "auto" | "real" | "in-process";

export interface ChaosKube {
  kind: "real" | "in-process";
  /** What the replicas' API link proxies forward to: the fault proxy before the real server, or the in-process one. */
  address: { host: string; port: number };
  scheme: "http" | "https";
  /** The CA the replicas' kubeconfigs trust (https only). */
  caFile?: string;
  tokenFor(pod: string): string;
  faults: FaultControl;
  clearRequests(): void;
  /**
   * The kubelet's report of the pod's application container turning ready or unready, straight to
   * the server (no fault on its way); resolves once the server has stored it.
   */
  setAppReady(pod: string, ready: boolean): Promise<void>;
  /** The kubelet's report of the pod's sidecar container (a crash, a restart), as setAppReady. */
  reportSidecar(pod: string, report: (pod: V1Pod) => ContainerReport): Promise<void>;
  /** The label recorder, straight to the server (no fault on its way). */
  watchLabels(roleLabel: string): LabelWatch;
  close(): Promise<void>;
}

export interface KubeSetup {
  choice: ApiServerChoice;
  namespace: string;
  pods: string[];
  /** Labels every pod carries (the workload's selector labels). */
  labels: Record<string, string>;
  note(message: string): void;
}

const IN_PROCESS_TOKEN = "chaos-run-token";
// Longer than any run: a token that expired mid-run would look like an API fault that is not one.
const TOKEN_SECONDS = 24 * 3_600;

/** Why the real server cannot be used here, or null when it can. */
async function realUnavailable(): Promise<string | null> {
  const tools = await kubeTools();
  if (!tools.ok) return tools.reason;
  const available = await realKubeApiServerAvailable();
  return available.ok ? null : available.reason;
}

export async function startChaosKube(setup: KubeSetup): Promise<ChaosKube> {
  if (setup.choice !== "in-process") {
    const reason = await realUnavailable();
    if (reason === null) return startReal(setup);
    if (setup.choice === "real") throw new Error(`--api-server real: ${reason}`);
    setup.note(`on the in-process API server: the real kube-apiserver is not available (${reason})`);
  }
  return startInProcess(setup);
}

async function startInProcess(setup: KubeSetup): Promise<ChaosKube> {
  const server = await startKubeApiServer({ token: IN_PROCESS_TOKEN });
  for (const name of setup.pods) {
    server.seedPod({
      metadata: { name, namespace: setup.namespace, labels: setup.labels },
      spec: CHAOS_POD_SPEC,
    });
  }
  const url = new URL(server.url);
  return {
    kind: "in-process",
    address: { host: url.hostname, port: Number(url.port) },
    scheme: "http",
    tokenFor: () => IN_PROCESS_TOKEN,
    faults: server.faults,
    clearRequests: () => server.clearRequests(),
    setAppReady: async (pod, ready) => {
      server.mutatePod(setup.namespace, pod, (p) => setAppReady(p, ready, new Date()));
    },
    reportSidecar: async (pod, report) => {
      server.mutatePod(setup.namespace, pod, (p) => setSidecarStatus(p, report, new Date()));
    },
    watchLabels: (roleLabel) =>
      watchRoleLabels({
        serverUrl: server.url,
        token: IN_PROCESS_TOKEN,
        namespace: setup.namespace,
        roleLabel,
      }),
    close: () => server.close(),
  };
}

async function startReal(setup: KubeSetup): Promise<ChaosKube> {
  const server = await startRealKubeApiServer();
  try {
    const { info } = server;
    const admin = server.admin();
    const identity = await installChartRbac(admin, setup.namespace);
    const core = admin.makeApiClient(CoreV1Api);
    const serviceAccount = identity.user.split(":").at(-1) ?? "";
    const tokens = new Map<string, string>();
    for (const name of setup.pods) {
      const pod = await createRunningPod(admin, setup.namespace, {
        metadata: { name, labels: setup.labels },
        // A token is bound only to a pod that runs as its ServiceAccount.
        spec: { serviceAccountName: serviceAccount, ...CHAOS_POD_SPEC },
      });
      const request = await core.createNamespacedServiceAccountToken({
        namespace: setup.namespace,
        name: serviceAccount,
        body: {
          spec: {
            audiences: [],
            expirationSeconds: TOKEN_SECONDS,
            boundObjectRef: { apiVersion: "v1", kind: "Pod", name, uid: pod.metadata?.uid },
          },
        },
      });
      if (!request.status?.token) throw new Error(`the TokenRequest API returned no token for pod ${name}`);
      tokens.set(name, request.status.token);
    }
    const [ca, cert, key] = await Promise.all([
      readFile(info.caFile),
      readFile(info.servingCertFile),
      readFile(info.servingKeyFile),
    ]);
    const proxy = await startKubeProxy({ target: info.server, ca, cert, key });
    return {
      kind: "real",
      address: { host: "127.0.0.1", port: Number(new URL(proxy.url).port) },
      scheme: "https",
      caFile: info.caFile,
      tokenFor: (pod) => {
        const token = tokens.get(pod);
        if (!token) throw new Error(`no token for pod ${pod}`);
        return token;
      },
      faults: proxy.faults,
      clearRequests: () => {
        proxy.requests.length = 0;
      },
      setAppReady: (pod, ready) =>
        writeKubeletStatus(admin, setup.namespace, pod, (p) => setAppReady(p, ready, new Date())),
      reportSidecar: (pod, report) =>
        writeKubeletStatus(admin, setup.namespace, pod, (p) => setSidecarStatus(p, report, new Date())),
      watchLabels: (roleLabel) =>
        watchRoleLabels({
          serverUrl: info.server,
          token: identity.token,
          ca,
          namespace: setup.namespace,
          roleLabel,
        }),
      close: async () => {
        await proxy.close();
        await server.close();
      },
    };
  } catch (error) {
    await server.close();
    throw error;
  }
}

/**
 * The kubelet's status write races the sidecars' label patches: a replace of a version that
 * changed meanwhile is refused (409), and the kubelet, like this, reads the pod again and retries.
 */
async function writeKubeletStatus(
  admin: KubeConfig,
  namespace: string,
  pod: string,
  write: (pod: V1Pod) => void,
): Promise<void> {
  for (let attempt = 1; ; attempt++) {
    try {
      await mutateRealPod(admin, namespace, pod, write);
      return;
    } catch (error) {
      if (attempt >= 10 || (error as { code?: number }).code !== 409) throw error;
    }
  }
}
