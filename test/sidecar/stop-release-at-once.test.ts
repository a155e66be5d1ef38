// A stopping leader's release does not wait for its own demotion when the new leader keeps the
// labels apart (issue 30): with peer demotion in one cluster, the new leader lists its peers from
// the API server and demotes any pod still labelled leader before it labels itself. The server
// holds the stopping leader's own demotion (its merge patch): the follower must still take the
// lease at once, demote the old pod itself, and only then label its own. Without peer demotion
// nobody else takes the old label off, so the release still waits for the demotion.
import { expect, it } from "vitest";
import { labelEvents } from "../support/kube/leader-timeline.ts";
import { onEachSidecarKubeServer } from "../support/kube/sidecar-kube-suite.ts";

const NS = "release-at-once";
const LABELS = { "app.kubernetes.io/name": "orders", "app.kubernetes.io/instance": "prod" };
// A long grace period: a demotion waited for would hold the lease for its budget (10 s).
const LONG = ["--duration", "10s", "--grace-period", "40s"];

await onEachSidecarKubeServer("pglease stopping while its own demotion is held", NS, (suite) => {
  /** a leads and b follows; SIGTERM to a while the server holds a's own label patch. */
  async function stopWithDemotionHeld(prefix: string, lease: string, args: readonly string[]) {
    const [podA, podB] = [`${prefix}-a`, `${prefix}-b`];
    const { a, b } = await suite.pair(prefix, lease, LABELS, args);
    suite.kube.clearRequests();
    // a's own label patches (merge patches); b's patches of a's pod are JSON patches and pass.
    const held = suite.kube.faults.hang({
      match: {
        method: "PATCH",
        path: new RegExp(`/pods/${podA}$`),
        contentType: "application/merge-patch+json",
      },
    });
    const sent = performance.now();
    const exited = a.stop("SIGTERM");
    await held.waitForHeld();
    return { a, b, podA, podB, held, sent, exited };
  }

  it("with peer demotion, the leader releases at once and the new leader demotes the old pod before labelling itself", async () => {
    const { b, podA, podB, held, sent, exited } = await stopWithDemotionHeld("peer", "at-once", LONG);
    try {
      await b.waitForLog(/^acquired lease at-once with fence \d+$/, 5_000);
      // The old code released only once the held demotion was answered, or after its 10 s budget.
      expect(performance.now() - sent).toBeLessThan(3_000);
      await expect.poll(() => suite.role(podB), { timeout: 5_000 }).toBe("leader");
      expect(await suite.role(podA)).toBe("follower");
      expect(held.held).toBe(1); // still held: b's own patch took a's label off
      // The recording proxy sets a request's status when the API server's answer reaches it: b's
      // label, already on its pod, may still show status 0. Waited for, not read once.
      const accepted = () => labelEvents(suite.kube.requests, new Map());
      await expect
        .poll(
          () => [
            accepted().some((s) => s.pod === podA && !s.leader),
            accepted().some((s) => s.pod === podB && s.leader),
          ],
          { timeout: 5_000 },
        )
        .toEqual([true, true]);
      const shown = accepted();
      const demoted = shown.findIndex((s) => s.pod === podA && !s.leader);
      const labelled = shown.findIndex((s) => s.pod === podB && s.leader);
      expect(demoted).toBeGreaterThanOrEqual(0);
      expect(demoted).toBeLessThan(labelled);
    } finally {
      held.release();
    }
    expect((await exited).code).toBe(0);
    expect(await suite.role(podA)).toBe("follower");
  });

  it("without peer demotion, the release still waits for the leader's own demotion", async () => {
    const args = [...LONG, "--no-peer-demotion"];
    const { a, b, podA, held, exited } = await stopWithDemotionHeld("own", "waits", args);
    let released = false;
    try {
      // Long enough for a release sent at once to be claimed many times over (it took < 100 ms above).
      await new Promise((resolve) => setTimeout(resolve, 1_500));
      expect(a.output()).not.toMatch(/released lease waits/);
      expect(b.output()).not.toMatch(/acquired lease waits/);
      held.release();
      released = true;
      await b.waitForLog(/^acquired lease waits with fence \d+$/, 10_000);
      expect(await suite.role(podA)).toBe("follower");
    } finally {
      if (!released) held.release();
    }
    expect((await exited).code).toBe(0);
  });
});
