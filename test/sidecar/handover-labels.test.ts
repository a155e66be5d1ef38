// Planned handover as the pods show it: the leader's pod is demoted, the target's labelled, and a
// pod that handed over is labelled again when leadership comes back to it (it was not: the
// sidecar took a handover's demotion for the shutdown's, and never labelled the pod leader again).
import type { V1Pod } from "@kubernetes/client-node";
import { expect, it } from "vitest";
import { onEachSidecarKubeServer } from "../support/kube/sidecar-kube-suite.ts";
import { runPglease } from "../support/processes/cli.ts";

const NS = "moves";

// On the real server under the chart's admission policy for these pods' labels.
const UNDER_POLICY = { namespace: NS, admissionPolicy: { release: "t", values: { nameOverride: "moves" } } };

await onEachSidecarKubeServer("pglease handover on labelled pods", UNDER_POLICY, (suite) => {
  const seed = async (name: string): Promise<void> => {
    await suite.kube.seedPod({
      metadata: {
        name,
        namespace: NS,
        labels: { "app.kubernetes.io/name": "moves", "app.kubernetes.io/instance": "t" },
      },
      spec: { containers: [{ name: "app", image: "app:1" }] },
      status: {
        phase: "Running",
        conditions: [{ type: "Ready", status: "True", lastTransitionTime: new Date() }],
      },
    } as V1Pod);
  };
  const sidecar = async (pod: string) => (await suite.sidecar(pod, "moved")).run;
  const role = suite.role;

  it("moves the leader label to the target, and back to a pod that handed over before", async () => {
    await seed("moves-1");
    await seed("moves-2");
    const one = await sidecar("moves-1");
    await one.waitForLog(/^acquired lease moved/);
    await expect.poll(() => role("moves-1"), { timeout: 10_000 }).toBe("leader");
    const two = await sidecar("moves-2");
    await two.waitForLog(/^lease moved is held by/);
    const env = { DATABASE_URL: suite.db.url };
    await expect
      .poll(async () => (await runPglease(["handover", "moved", "--to", "moves-2"], env)).code, {
        timeout: 10_000,
      })
      .toBe(0);
    await expect
      .poll(async () => [await role("moves-1"), await role("moves-2")], { timeout: 10_000 })
      .toEqual(["follower", "leader"]);
    expect((await runPglease(["handover", "moved", "--to", "moves-1"], env)).code).toBe(0);
    await expect
      .poll(async () => [await role("moves-1"), await role("moves-2")], { timeout: 10_000 })
      .toEqual(["leader", "follower"]);
  });
});
