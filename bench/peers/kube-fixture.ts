// The in-process test API server as the bench's candidates see it: a Role, a kubeconfig file for
// the child processes, and pods to publish to.
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { type KubeApiServer, startKubeApiServer } from "../../test/support/kube-apiserver/index.ts";

export const NAMESPACE = "bench";

/** The chart's Role (charts/pglease-sidecar/templates/_rbac.tpl) plus what client-go's election needs on Leases. */
const ROLE = {
  metadata: { namespace: NAMESPACE },
  rules: [
    { apiGroups: [""], resources: ["pods"], verbs: ["get", "list", "watch", "patch"] },
    { apiGroups: [""], resources: ["pods/status"], verbs: ["patch"] },
    { apiGroups: [""], resources: ["events"], verbs: ["create"] },
    { apiGroups: ["coordination.k8s.io"], resources: ["leases"], verbs: ["get", "create", "update"] },
  ],
};

export interface KubeFixture {
  server: KubeApiServer;
  /** KUBECONFIG and POD_NAMESPACE for a candidate process. */
  env: NodeJS.ProcessEnv;
  seedPod(name: string, labels?: Record<string, string>): void;
  close(): Promise<void>;
}

export async function startKubeFixture(): Promise<KubeFixture> {
  const server = await startKubeApiServer({ role: ROLE, user: `system:serviceaccount:${NAMESPACE}:bench` });
  let configDir: string | undefined;
  try {
    configDir = await mkdtemp(join(tmpdir(), "pglease-bench-kube-"));
    const kubeconfig = join(configDir, "config");
    await writeFile(kubeconfig, server.kubeConfig({ namespace: NAMESPACE }).exportConfig());
  } catch (error) {
    await server.close();
    throw error;
  }
  const dir = configDir;
  return {
    server,
    env: { KUBECONFIG: join(dir, "config"), POD_NAMESPACE: NAMESPACE },
    seedPod(name, labels) {
      server.seedPod({
        metadata: { name, namespace: NAMESPACE, ...(labels ? { labels } : {}) },
        spec: { containers: [{ name: "app", image: "app:1" }] },
      });
    },
    async close() {
      try {
        await server.close();
      } finally {
        await rm(dir, { recursive: true, force: true });
      }
    },
  };
}
