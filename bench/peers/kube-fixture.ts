// The API server the bench's candidates publish to and elect through, as they see it: the chart's
// Role plus what a Lease election needs, the chart's ServiceAccount, a kubeconfig file for the
// child processes, pods to publish to, and the log of what they sent. The real kube-apiserver
// (test/kube-apiserver-go, one per bench run, a namespace and a recording proxy per fixture) when
// it is built, and with it the real client-go elector; else the in-process test server, for
// pglease's publishing only: without the real server there is no client-go to measure.
import { execFile } from "node:child_process";
import { mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { promisify } from "node:util";
import type { RecordedRequest } from "../../test/support/kube/apiserver/index.ts";
import { repoRoot } from "../../test/support/kube/chart.ts";
import {
  chartRules,
  inProcessKubeServer,
  type KubeServerKind,
  realKubeServer,
  type TestKube,
} from "../../test/support/kube/kube-servers.ts";
import { setAppReady, workloadPodSpec } from "../../test/support/kube/kubelet.ts";
import { realKubeApiServerAvailable } from "../../test/support/kube/real-kube-apiserver.ts";

const NAMESPACE = "bench";

/** What client-go's election does with its Lease, on top of the chart's Role (charts/pglease-sidecar/templates/_rbac.tpl), which grants none: pglease needs none. */
const LEASE_RULE = {
  apiGroups: ["coordination.k8s.io"],
  resources: ["leases"],
  verbs: ["get", "create", "update"],
};

export interface KubeFixture {
  /** The API server as the harness drives it (the rollout plays the controllers and the kubelet on it). */
  server: TestKube;
  namespace: string;
  /** Every request the candidates sent, in arrival order, with its answer's status. */
  requests: RecordedRequest[];
  /** The pod's pglease.io/role label as the server holds it now. */
  roleLabel(pod: string): Promise<string | undefined>;
  /** KUBECONFIG and POD_NAMESPACE for a candidate process. */
  env: NodeJS.ProcessEnv;
  /** The real client-go elector's binary, or undefined: client-go is then not measured. */
  clientGoElector: string | undefined;
  seedPod(name: string, labels?: Record<string, string>): Promise<void>;
  /** The kubelet's report of the pod's `app` container: ready or not (the health gate's input). */
  setAppReady(name: string, ready: boolean): Promise<void>;
  close(): Promise<void>;
}

/** Which API server and which client-go the peers ran against, for the results. */
export interface KubeBackend {
  apiServer: string;
  /** The client-go the peer was built from, or null: not measured. */
  clientGo: string | null;
  /** Why client-go was not measured. */
  reason?: string;
}

interface Backend {
  kind: KubeServerKind;
  info: KubeBackend;
  clientGoElector: string | undefined;
}

let backend: Promise<Backend> | undefined;
let fixtures = 0;

const GO_MODULE = join(repoRoot, "test", "kube-apiserver-go");

/** The versions test/kube-apiserver-go builds, from its go.mod (the build's key). */
async function builtVersions(): Promise<{ kubernetes: string; etcd: string; clientGo: string }> {
  const goMod = await readFile(join(GO_MODULE, "go.mod"), "utf8");
  const version = (module: string) =>
    new RegExp(`^\\s*${module.replaceAll(".", "\\.")} (v\\S+)$`, "m").exec(goMod)?.[1] ?? "unknown";
  return {
    kubernetes: version("k8s.io/kubernetes"),
    etcd: version("go.etcd.io/etcd/server/v3"),
    clientGo: version("k8s.io/client-go"),
  };
}

function chooseBackend(): Promise<Backend> {
  backend ??= realKubeApiServerAvailable().then(async (available): Promise<Backend> => {
    if (!available.ok) {
      return {
        kind: inProcessKubeServer(),
        info: { apiServer: "in-process test API server", clientGo: null, reason: available.reason },
        clientGoElector: undefined,
      };
    }
    const versions = await builtVersions();
    return {
      kind: realKubeServer(),
      info: {
        apiServer: `kube-apiserver ${versions.kubernetes} on etcd ${versions.etcd}`,
        clientGo: `k8s.io/client-go ${versions.clientGo} tools/leaderelection, LeaseLock`,
      },
      clientGoElector: join(dirname(available.binary), "client-go-elector"),
    };
  });
  return backend;
}

/** Which API server and client-go the peers run against (the first call decides). */
export async function kubeBackend(): Promise<KubeBackend> {
  return (await chooseBackend()).info;
}

/** Where the bench's candidates meet Kubernetes, said once at the start of a run. */
export async function kubeBackendDescription(): Promise<string> {
  const { apiServer, clientGo, reason } = await kubeBackend();
  return clientGo ? `${apiServer}, ${clientGo}` : `${apiServer}; client-go not measured: ${reason}`;
}

/**
 * Builds the real kube-apiserver and client-go elector when Go is there and they are not
 * (scripts/build-kube-apiserver.sh, its progress on this terminal), so one `npm run bench`
 * measures every peer. Call before anything asks which backend runs.
 */
export async function buildKubeApiServer(progress: (line: string) => void): Promise<void> {
  const build = promisify(execFile)("bash", [join(repoRoot, "scripts", "build-kube-apiserver.sh")], {
    maxBuffer: 1 << 20,
  });
  build.child.stderr?.on("data", (chunk: Buffer) => {
    for (const line of chunk.toString().trimEnd().split("\n")) progress(line);
  });
  await build;
}

/** Stops the real API server the fixtures shared; the bench calls it once, at the end. */
export async function stopKubeFixtures(): Promise<void> {
  const running = backend;
  backend = undefined;
  if (running) await (await running).kind.release();
}

export async function startKubeFixture(): Promise<KubeFixture> {
  const { kind, clientGoElector } = await chooseBackend();
  // A namespace each on the shared real server, so one fixture's pods and Leases are not another's.
  const namespace = fixtures++ === 0 ? NAMESPACE : `${NAMESPACE}-${fixtures}`;
  const kube = await kind.start({ namespace, rules: [...(await chartRules()), LEASE_RULE] });
  let configDir: string | undefined;
  try {
    configDir = await mkdtemp(join(tmpdir(), "pglease-bench-kube-"));
    await writeFile(join(configDir, "config"), kube.kubeConfig({ namespace }).exportConfig());
  } catch (error) {
    await kube.close();
    throw error;
  }
  const dir = configDir;
  return {
    server: kube,
    namespace,
    requests: kube.requests,
    roleLabel: async (pod) => (await kube.pod(namespace, pod))?.metadata?.labels?.["pglease.io/role"],
    env: { KUBECONFIG: join(dir, "config"), POD_NAMESPACE: namespace },
    clientGoElector,
    async seedPod(name, labels) {
      await kube.seedPod({
        metadata: { name, namespace, ...(labels ? { labels } : {}) },
        spec: workloadPodSpec(),
      });
    },
    setAppReady: (name, ready) => setAppReady(kube, namespace, name, ready),
    async close() {
      try {
        await kube.close();
      } finally {
        await rm(dir, { recursive: true, force: true });
      }
    },
  };
}
