// `helm uninstall` deletes the chart's ServiceAccount and RBAC while the pods still stop, so the
// stopping leader's demotion is refused. Its pod is being deleted: it is out of its Services'
// ready endpoints already, and the leader releases at once instead of holding the lease to its
// local deadline. A pod that is not being deleted (its sidecar restarted in place, RBAC taken
// away by hand) stays routable: without peer demotion its leader keeps waiting for the demotion,
// as before; with peer demotion the leader never waits for its own demotion (the new leader
// demotes it first, issue 30), and a new leader refused too never labels itself.
import { expect, it } from "vitest";
import { chartRules } from "../support/kube/kube-servers.ts";
import { onEachSidecarKubeServer } from "../support/kube/sidecar-kube-suite.ts";

const NS = "uninstall";
const LABELS = { "app.kubernetes.io/name": "orders", "app.kubernetes.io/instance": "prod" };
// A long lease and grace period: the local deadline is seconds away from the SIGTERM.
const LONG = ["--duration", "10s", "--grace-period", "40s"];

await onEachSidecarKubeServer("pglease stopping while its access is taken away", NS, (suite) => {
  /** Two pods of the workload, the first one's sidecar leading, the second's following. */
  async function pair(prefix: string, lease: string, args: readonly string[] = LONG) {
    return suite.pair(prefix, lease, LABELS, args);
  }

  /** SIGTERM to the leader; ms until the follower holds the lease, and the leader's exit. */
  async function stopAndTime({ a, b }: Awaited<ReturnType<typeof pair>>, lease: string) {
    const sent = performance.now();
    const exited = a.stop("SIGTERM");
    await b.waitForLog(new RegExp(`^acquired lease ${lease} with fence \\d+$`), 20_000);
    const takenOverAfterMs = performance.now() - sent;
    return { takenOverAfterMs, exit: await exited };
  }

  it("without peer demotion, a pod not being deleted keeps waiting for its refused demotion (it is still routable)", async () => {
    const sidecars = await pair("kept", "uninstall-1", [...LONG, "--no-peer-demotion"]);
    await suite.kube.setRules([]); // the Role emptied by hand: every request is refused (403)
    try {
      const { takenOverAfterMs, exit } = await stopAndTime(sidecars, "uninstall-1");
      // The leader holds its term to its local deadline; the follower claims then. The wait for the
      // demotion is bounded by that same deadline, so the term ends there either way: the deadline's
      // timer steps down, or the bounded wait's timer, due at the same millisecond, releases.
      expect(takenOverAfterMs).toBeGreaterThan(3_000);
      expect(sidecars.a.output()).toMatch(
        /stepped down from lease uninstall-1 \(fence \d+\): no successful renew|released lease uninstall-1 \(fence \d+\)/,
      );
      expect(exit.code).toBe(0);
      expect(await suite.role("kept-a")).toBe("leader"); // never demoted: the refusal stands
    } finally {
      await suite.kube.setRules(await chartRules());
    }
  });

  it("with peer demotion, a pod not being deleted releases at once and the refused new leader never labels itself", async () => {
    const sidecars = await pair("fenced", "uninstall-3");
    await suite.kube.setRules([]); // the Role emptied by hand: every request is refused (403)
    try {
      const { takenOverAfterMs, exit } = await stopAndTime(sidecars, "uninstall-3");
      expect(takenOverAfterMs).toBeLessThan(2_000);
      expect(exit.code).toBe(0);
      // The new leader cannot take a's label off, so it leaves its own pod unlabelled.
      await sidecars.b.waitForLog(/^missing permission/, 10_000);
      expect(await suite.role("fenced-a")).toBe("leader");
      expect(await suite.role("fenced-b")).toBe("follower");
    } finally {
      await suite.kube.setRules(await chartRules());
    }
  });

  it("a pod being deleted after helm uninstall releases at once", async () => {
    const sidecars = await pair("gone", "uninstall-2");
    await suite.kube.uninstallIdentity(); // the ServiceAccount and RBAC deleted: 401 from now on
    await suite.kube.deletePod(NS, "gone-a", 30); // the garbage collector's DELETE: terminating
    const { takenOverAfterMs, exit } = await stopAndTime(sidecars, "uninstall-2");
    expect(takenOverAfterMs).toBeLessThan(2_000);
    expect(sidecars.a.output()).toMatch(/^.*released lease uninstall-2 \(fence \d+\)/m);
    expect(sidecars.a.output()).toMatch(/is being deleted and the API server refuses its demotion/);
    expect(exit.code).toBe(0);
  });
});
