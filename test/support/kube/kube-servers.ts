// The two API servers the Kubernetes suites run on, behind one interface: the real kube-apiserver
// (the reference; through a recording, fault-injecting proxy) and the in-process one (which can
// also fake what a real server never does). Both enforce the Role the chart renders by default, and
// the code under test holds a ServiceAccount identity on both: a real TokenRequest token on the
// real server.
//
// Suites use onEachKubeServer (kube-server-suites.ts); the bench uses the kinds directly.
import { readFile } from "node:fs/promises";
import {
  type CoreV1Event,
  KubeConfig,
  type V1Pod,
  type V1PolicyRule,
  type V1Role,
} from "@kubernetes/client-node";
import type { FaultControl, RecordedRequest } from "./apiserver/index.ts";
import { startKubeApiServer } from "./apiserver/index.ts";
import { type ChartValues, kubeTools, renderChartRole } from "./chart.ts";
import {
  type RealKubeApiServer,
  realKubeApiServerAvailable,
  type ServerInfo,
  startRealKubeApiServer,
} from "./real-kube-apiserver.ts";
import {
  type ChartIdentity,
  createRunningPod,
  deleteRealPod,
  emptyNamespace,
  installChartRbac,
  mutateRealPod,
  readEvents,
  readPod,
  replaceRole,
  uninstallChartRbac,
} from "./real-kube-cluster.ts";
import { startKubeProxy } from "./real-kube-proxy.ts";

/** One test's view of an API server: the code under test's credentials, the state, the request log, faults. */
export interface TestKube {
  /** The user a 403 names (the chart's ServiceAccount). */
  user: string;
  /** The chart's ServiceAccount identity, for the code under test. */
  kubeConfig(options?: { namespace?: string }): KubeConfig;
  /** A pod created and reported Running by the kubelet (the kubelet's conditions and container statuses). */
  seedPod(pod: V1Pod): Promise<V1Pod>;
  pod(namespace: string, name: string): Promise<V1Pod | undefined>;
  /** Another actor's write (kubectl, the kubelet). */
  mutatePod(namespace: string, name: string, change: (pod: V1Pod) => void): Promise<V1Pod>;
  /**
   * A DELETE as a controller sends it: with a grace period the pod stays, marked terminating, until
   * the kubelet's DELETE with 0 once its containers have exited.
   */
  deletePod(namespace: string, name: string, graceSeconds: number): Promise<void>;
  events(namespace: string): Promise<CoreV1Event[]>;
  /** What the code under test sent, in arrival order (the harness's own reads and writes are not in it). */
  requests: RecordedRequest[];
  clearRequests(): void;
  readonly openWatches: number;
  waitForWatches(n?: number): Promise<void>;
  faults: FaultControl;
  /** Replaces the rules of the chart's Role; effective when it resolves. */
  setRules(rules: V1PolicyRule[]): Promise<void>;
  /**
   * What `helm uninstall` does to the code under test's identity while its pods still stop: from
   * now on its requests are refused as unauthenticated (401); watches already open go on (a
   * request is authenticated once, when it starts). The real server: the chart's RoleBinding,
   * Role and ServiceAccount deleted (the next start() in the namespace installs them again).
   */
  uninstallIdentity(): Promise<void>;
  close(): Promise<void>;
}

export interface StartOptions {
  namespace: string;
  /** The Role's rules; the chart's when omitted. */
  rules?: V1PolicyRule[];
  /**
   * On the real server: the chart installed as this release (its pods' selector labels follow
   * the name), with its ValidatingAdmissionPolicy, so the code under test runs under it too.
   */
  admissionPolicy?: { release: string; values?: ChartValues; withoutReasons?: boolean };
}

export interface KubeServerKind {
  name: "real" | "in-process";
  start(options: StartOptions): Promise<TestKube>;
  /** Stops what the suite's tests share (the real server); call it in afterAll. */
  release(): Promise<void>;
}

let chartRole: Promise<V1Role> | undefined;

/** The rules of the Role the chart renders (to take one away from, say). */
export async function chartRules(): Promise<V1PolicyRule[]> {
  chartRole ??= renderChartRole();
  return (await chartRole).rules ?? [];
}

export function inProcessKubeServer(): KubeServerKind {
  return {
    name: "in-process",
    async start({ namespace, rules }) {
      chartRole ??= renderChartRole();
      const role = await chartRole;
      const user = `system:serviceaccount:${namespace}:${role.metadata?.name}`;
      const server = await startKubeApiServer({ role: { ...role, ...(rules ? { rules } : {}) }, user });
      return {
        user,
        kubeConfig: (o) => server.kubeConfig(o),
        seedPod: async (pod) => server.seedPod({ ...pod, metadata: { namespace, ...pod.metadata } }),
        pod: async (ns, name) => server.pod(ns, name),
        mutatePod: async (ns, name, change) => server.mutatePod(ns, name, change),
        // The in-process server has no graceful deletion: the mark is written as the real one would.
        deletePod: async (ns, name, graceSeconds) => {
          if (graceSeconds === 0) return server.deletePod(ns, name);
          await server.mutatePod(ns, name, (pod) => {
            // kube-apiserver writes the time the grace period ends (rest.BeforeDelete), not now.
            const ends = new Date(Date.now() + graceSeconds * 1000);
            pod.metadata = { ...pod.metadata, deletionTimestamp: ends };
            pod.metadata.deletionGracePeriodSeconds = graceSeconds;
            // As the real server does on a graceful deletion.
            pod.metadata.generation = (pod.metadata.generation ?? 1) + 1;
          });
        },
        events: async (ns) => server.events(ns),
        requests: server.requests,
        clearRequests: () => server.clearRequests(),
        get openWatches() {
          return server.openWatches;
        },
        waitForWatches: (n) => server.waitForWatches(n),
        faults: server.faults,
        setRules: async (next) => server.setRole({ ...role, rules: next }),
        uninstallIdentity: async () =>
          server.faults.failNext({ status: 401, count: Number.MAX_SAFE_INTEGER, message: "Unauthorized" }),
        close: () => server.close(),
      };
    },
    release: async () => {},
  };
}

/** One test's view of the real server: the identity's token through a fresh recording proxy, the rest as the admin. */
async function realTestKube(
  info: ServerInfo,
  admin: KubeConfig,
  namespace: string,
  identity: ChartIdentity,
  setRules: (rules: V1PolicyRule[]) => Promise<void>,
  uninstallIdentity: () => Promise<void>,
): Promise<TestKube> {
  const [ca, cert, key] = await Promise.all([
    readFile(info.caFile),
    readFile(info.servingCertFile),
    readFile(info.servingKeyFile),
  ]);
  const proxy = await startKubeProxy({ target: info.server, ca, cert, key });
  return {
    user: identity.user,
    kubeConfig: ({ namespace: ns = "default" } = {}) => {
      const kc = new KubeConfig();
      kc.loadFromOptions({
        clusters: [{ name: "real", server: proxy.url, caFile: info.caFile }],
        users: [{ name: "pglease", token: identity.token }],
        contexts: [{ name: "real", cluster: "real", user: "pglease", namespace: ns }],
        currentContext: "real",
      });
      return kc;
    },
    seedPod: (pod) => createRunningPod(admin, pod.metadata?.namespace ?? namespace, pod),
    pod: (ns, name) => readPod(admin, ns, name),
    mutatePod: (ns, name, change) => mutateRealPod(admin, ns, name, change),
    deletePod: (ns, name, graceSeconds) => deleteRealPod(admin, ns, name, graceSeconds),
    events: (ns) => readEvents(admin, ns),
    requests: proxy.requests,
    clearRequests: () => {
      proxy.requests.length = 0;
    },
    get openWatches() {
      return proxy.openWatches;
    },
    waitForWatches: (n) => proxy.waitForWatches(n),
    faults: proxy.faults,
    setRules,
    uninstallIdentity,
    close: () => proxy.close(),
  };
}

/**
 * One real kube-apiserver, started on the first start() and shared by every namespace until
 * release(); `flags` are extra kube-apiserver flags (no watch cache, a short etcd compaction, …).
 */
export function realKubeServer({ flags }: { flags?: string[] } = {}): KubeServerKind {
  let server: Promise<RealKubeApiServer> | undefined;
  const identities = new Map<string, Promise<ChartIdentity>>();
  // The rules each namespace's Role holds now, so a test that changed them is undone by the next.
  const rulesNow = new Map<string, string>();
  return {
    name: "real",
    async start({ namespace, rules, admissionPolicy }) {
      server ??= startRealKubeApiServer(flags ? { flags } : {});
      const { info, admin } = await server;
      const adminConfig = admin();
      if (!identities.has(namespace)) {
        const installed = admissionPolicy
          ? installChartRbac(adminConfig, namespace, admissionPolicy.values, {
              release: admissionPolicy.release,
              admissionPolicy: true,
              withoutReasons: admissionPolicy.withoutReasons ?? false,
            })
          : installChartRbac(adminConfig, namespace);
        identities.set(namespace, installed);
      }
      const identity = await (identities.get(namespace) as Promise<ChartIdentity>);
      const setRules = async (next: V1PolicyRule[]) => {
        if (rulesNow.get(namespace) === JSON.stringify(next)) return;
        await replaceRole(adminConfig, identity.user, { ...identity.role, rules: next });
        rulesNow.set(namespace, JSON.stringify(next));
      };
      if (!rulesNow.has(namespace)) rulesNow.set(namespace, JSON.stringify(identity.role.rules));
      await setRules(rules ?? identity.role.rules ?? []);
      await emptyNamespace(adminConfig, namespace);
      const uninstallIdentity = async () => {
        identities.delete(namespace);
        rulesNow.delete(namespace);
        await uninstallChartRbac(adminConfig, namespace, identity);
      };
      return realTestKube(info, adminConfig, namespace, identity, setRules, uninstallIdentity);
    },
    async release() {
      const running = server;
      server = undefined;
      identities.clear();
      rulesNow.clear();
      if (running) await (await running).close();
    },
  };
}

/**
 * The servers a suite can run on here. One that cannot (no Go, the binary not built, no helm for
 * the chart's Role) is left out with one line saying why; in CI a missing binary is an error, as
 * CI builds it.
 */
export async function kubeServers(suite: string): Promise<KubeServerKind[]> {
  const tools = await kubeTools();
  if (!tools.ok) {
    console.warn(`[${suite}] skipped: ${tools.reason}`);
    return [];
  }
  const available = await realKubeApiServerAvailable();
  if (!available.ok) {
    if (process.env.CI === "true" && !available.reason.includes("Go is not installed")) {
      throw new Error(`[${suite}] the real kube-apiserver is missing in CI: ${available.reason}`);
    }
    console.warn(`[${suite}] on the in-process API server only: ${available.reason}`);
    return [inProcessKubeServer()];
  }
  return [realKubeServer(), inProcessKubeServer()];
}
