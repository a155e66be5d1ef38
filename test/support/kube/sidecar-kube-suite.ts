// The frame of a suite of `pglease run` sidecars publishing to their pods, on each API server this
// machine has: a database, the API server with the chart's Role, a kubeconfig for the sidecars,
// and every sidecar it starts killed after each test.
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, afterEach, beforeAll, expect } from "vitest";
import { createTestDatabase, type TestDatabase } from "../postgres/database.ts";
import { type Running, startLeaseRun } from "../processes/cli.ts";
import { onEachKubeServer } from "./kube-server-suites.ts";
import type { StartOptions, TestKube } from "./kube-servers.ts";
import { seedWorkloadPod } from "./kubelet.ts";

export interface SidecarKubeSuite {
  /** Set in beforeAll. */
  db: TestDatabase;
  kube: TestKube;
  /** `pglease run` for `lease` in `pod` (a short lease unless `duration` says), killed after the test. */
  sidecar(
    pod: string,
    lease: string,
    extra?: readonly string[],
    duration?: string,
  ): Promise<{ run: Running; port: number }>;
  /** The pod's role label, as the API server has it now. */
  role(pod: string): Promise<string | undefined>;
  /**
   * Two ready pods of the workload `${prefix}-a` and `${prefix}-b`: a's sidecar leads `lease` and its
   * pod is labelled leader, then b's follows and its pod is labelled follower.
   */
  pair(
    prefix: string,
    lease: string,
    labels: Record<string, string>,
    args: readonly string[],
  ): Promise<{ a: Running; b: Running }>;
}

/**
 * `where` is the namespace, or the namespace with the chart's admission policy to install there
 * (on the real server; see StartOptions).
 */
export async function onEachSidecarKubeServer(
  title: string,
  where: string | Pick<StartOptions, "namespace" | "admissionPolicy">,
  body: (suite: SidecarKubeSuite) => void,
): Promise<void> {
  const start: StartOptions = typeof where === "string" ? { namespace: where } : where;
  const { namespace } = start;
  await onEachKubeServer(title, (server) => {
    let kubeconfigDir = "";
    const running: Running[] = [];
    const suite = {
      async sidecar(pod: string, lease: string, extra: readonly string[] = [], duration = "3s") {
        const env = {
          DATABASE_URL: suite.db.url,
          KUBECONFIG: join(kubeconfigDir, "config"),
          POD_NAME: pod,
          POD_NAMESPACE: namespace,
        };
        const started = await startLeaseRun(lease, duration, env, extra);
        running.push(started.run);
        return started;
      },
      role: async (pod: string) =>
        (await suite.kube.pod(namespace, pod))?.metadata?.labels?.["pglease.io/role"],
      async pair(prefix: string, lease: string, labels: Record<string, string>, args: readonly string[]) {
        const [podA, podB] = [`${prefix}-a`, `${prefix}-b`];
        await seedWorkloadPod(suite.kube, namespace, podA, labels, true);
        await seedWorkloadPod(suite.kube, namespace, podB, labels, true);
        const a = (await suite.sidecar(podA, lease, args)).run;
        await a.waitForLog(new RegExp(`^acquired lease ${lease} with fence \\d+$`));
        await expect.poll(() => suite.role(podA), { timeout: 10_000 }).toBe("leader");
        const b = (await suite.sidecar(podB, lease, args)).run;
        await b.waitForLog(new RegExp(`^lease ${lease} is held by`));
        await expect.poll(() => suite.role(podB), { timeout: 10_000 }).toBe("follower");
        return { a, b };
      },
    } as SidecarKubeSuite;
    beforeAll(async () => {
      suite.db = await createTestDatabase();
      suite.kube = await server.start(start);
      kubeconfigDir = await mkdtemp(join(tmpdir(), "pglease-kubeconfig-"));
      await writeFile(join(kubeconfigDir, "config"), suite.kube.kubeConfig({ namespace }).exportConfig());
    });
    afterEach(async () => {
      for (const r of running.splice(0)) await r.stop("SIGKILL");
    });
    afterAll(async () => {
      await suite.kube?.close();
      await suite.db?.drop();
      if (kubeconfigDir) await rm(kubeconfigDir, { recursive: true, force: true });
    });
    body(suite);
  });
}
