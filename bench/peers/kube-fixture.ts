// The API server the bench's candidates publish to and elect through, as they see it: the chart's
// Role plus what a Lease election needs, the chart's ServiceAccount, a kubeconfig file for the
// child processes, pods to publish to, and the log of what they sent. The real kube-apiserver
// (test/kube-apiserver-go, one per bench run, a namespace and a recording proxy per fixture) when
// it is built, and with it the real client-go elector; else the in-process test server and the
// TypeScript port of client-go's election.
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import type { RecordedRequest } from "../../test/support/kube-apiserver/index.ts";
import {
  chartRules,
  inProcessKubeServer,
  type KubeServerKind,
  realKubeServer,
} from "../../test/support/kube-servers.ts";
import { realKubeApiServerAvailable } from "../../test/support/real-kube-apiserver.ts";

const NAMESPACE = "bench";

/** What client-go's election does with its Lease, on top of the chart's Role (charts/pglease-sidecar/templates/_rbac.tpl), which grants none: pglease needs none. */
const LEASE_RULE = {
  apiGroups: ["coordination.k8s.io"],
  resources: ["leases"],
  verbs: ["get", "create", "update"],
};

export interface KubeFixture {
  /** Which API server and which client-go, for the report. */
  server: string;
  /** Every request the candidates sent, in arrival order, with its answer's status. */
  requests: RecordedRequest[];
  /** The pod's pglease.io/role label as the server holds it now. */
  roleLabel(pod: string): Promise<string | undefined>;
  /** KUBECONFIG and POD_NAMESPACE for a candidate process. */
  env: NodeJS.ProcessEnv;
  /** The real client-go elector's binary, or undefined: the TypeScript port then runs. */
  clientGoElector: string | undefined;
  seedPod(name: string, labels?: Record<string, string>): Promise<void>;
  close(): Promise<void>;
}

interface Backend {
  kind: KubeServerKind;
  server: string;
  clientGoElector: string | undefined;
}

let backend: Promise<Backend> | undefined;
let fixtures = 0;

function chooseBackend(): Promise<Backend> {
  backend ??= realKubeApiServerAvailable().then((available) =>
    available.ok
      ? {
          kind: realKubeServer(),
          server: "real kube-apiserver (test/kube-apiserver-go), client-go leaderelection",
          clientGoElector: join(dirname(available.binary), "client-go-elector"),
        }
      : {
          kind: inProcessKubeServer(),
          server: `in-process test API server, client-go's election ported to TypeScript (${available.reason})`,
          clientGoElector: undefined,
        },
  );
  return backend;
}

/** Where the bench's candidates meet Kubernetes, said once at the start of a run. */
export async function kubeBackendDescription(): Promise<string> {
  return (await chooseBackend()).server;
}

/** Stops the real API server the fixtures shared; the bench calls it once, at the end. */
export async function stopKubeFixtures(): Promise<void> {
  const running = backend;
  backend = undefined;
  if (running) await (await running).kind.release();
}

export async function startKubeFixture(): Promise<KubeFixture> {
  const { kind, server, clientGoElector } = await chooseBackend();
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
    server,
    requests: kube.requests,
    roleLabel: async (pod) => (await kube.pod(namespace, pod))?.metadata?.labels?.["pglease.io/role"],
    env: { KUBECONFIG: join(dir, "config"), POD_NAMESPACE: namespace },
    clientGoElector,
    async seedPod(name, labels) {
      await kube.seedPod({
        metadata: { name, namespace, ...(labels ? { labels } : {}) },
        spec: { containers: [{ name: "app", image: "app:1" }] },
      });
    },
    async close() {
      try {
        await kube.close();
      } finally {
        await rm(dir, { recursive: true, force: true });
      }
    },
  };
}
