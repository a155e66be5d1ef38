// A pod's deletion reaches its sidecar twice: on its own pod watch (deletionTimestamp set) within
// milliseconds, and as the kubelet's SIGTERM later (129-172 ms in a real cluster; with a native
// sidecar only once the application's containers have exited, up to their grace period). The
// EndpointSlice controller takes a terminating pod out of its Services at once, so a leader that
// waited for SIGTERM left the leader Service with no ready endpoint for that long (issue 30). The
// leader now hands over when its watch shows the deletion: the follower must lead while the test
// sends no SIGTERM at all. Then the SIGTERM: the same shutdown, once, exit 0, no new campaign.
// With peer demotion the deleted pod's own sidecar writes nothing to its pod before the SIGTERM:
// the new leader demotes it, and every write of its own queued beside that demotion at the API
// server, on the new leader's critical path (issue 30); alone, its SIGTERM demotes it.
import pg from "pg";
import { expect, it } from "vitest";
import type { RecordedRequest } from "../support/kube/apiserver/index.ts";
import { seedWorkloadPod } from "../support/kube/kubelet.ts";
import { labelEvents, roleIn } from "../support/kube/leader-timeline.ts";
import { onEachSidecarKubeServer } from "../support/kube/sidecar-kube-suite.ts";

const NS = "deletion";
const LABELS = { "app.kubernetes.io/name": "orders", "app.kubernetes.io/instance": "prod" };
// A 10 s lease: an expiry cannot explain a takeover within seconds, only a release can.
const LONG = ["--duration", "10s", "--grace-period", "40s"];
// Far below the 10 s lease; the old code's follower waited for the SIGTERM the test never sends.
const NO_SIGTERM_MS = 5_000;

/**
 * The patches of `pod` its own sidecar sent from `since`: a follower's metadata patch is a JSON
 * merge patch, while a new leader's demotion of a peer is a guarded JSON patch; and every condition
 * patch after the first (the new leader sends one with its demotion of the peer).
 */
function ownPatches(requests: readonly RecordedRequest[], pod: string, since: number): RecordedRequest[] {
  const patches = requests.filter(
    (r) => r.method === "PATCH" && r.resource === "pods" && r.name === pod && r.at >= since,
  );
  const merged = patches.filter((r) => !r.subresource && r.contentType?.includes("merge-patch"));
  const conditions = patches.filter((r) => r.subresource === "status");
  return [...merged, ...conditions.slice(1)];
}

/** When the API server answered the first accepted patch labelling `pod` leader (Date.now()). */
function labelledLeaderAt(requests: readonly RecordedRequest[], pod: string): number | undefined {
  const patch = requests.find(
    (r) =>
      r.method === "PATCH" &&
      r.resource === "pods" &&
      !r.subresource &&
      r.name === pod &&
      r.status === 200 &&
      roleIn(r.body) === "leader",
  );
  return patch === undefined ? undefined : (patch.answeredAt ?? patch.at);
}

await onEachSidecarKubeServer("pglease handing over when its pod is deleted", NS, (suite) => {
  /** The pods campaigning for `lease`, as the candidates table has them. */
  async function candidatePods(lease: string): Promise<string[]> {
    const client = new pg.Client({ connectionString: suite.db.url });
    await client.connect();
    try {
      const { rows } = await client.query<{ pod: string }>(
        "SELECT pod FROM pglease_leases_candidates WHERE key = $1 ORDER BY pod",
        [lease],
      );
      return rows.map((r) => r.pod);
    } finally {
      await client.end();
    }
  }

  /** a leads and b follows; a's pod is deleted gracefully and no SIGTERM is sent. */
  async function deleteLeaderPod(prefix: string, lease: string, args: readonly string[]) {
    const [podA, podB] = [`${prefix}-a`, `${prefix}-b`];
    const { a, b } = await suite.pair(prefix, lease, LABELS, args);
    suite.kube.clearRequests();
    await suite.kube.deletePod(NS, podA, 30); // kubectl delete: terminating, out of its Services
    const deletedAt = Date.now();
    await b.waitForLog(new RegExp(`^acquired lease ${lease} with fence \\d+$`), NO_SIGTERM_MS);
    await expect.poll(() => suite.role(podB), { timeout: NO_SIGTERM_MS }).toBe("leader");
    // The recording proxy sets a request's status once the API server's answer reaches it, so this
    // test's own read of the pod can show the label first: waited for, not read once.
    await expect.poll(() => labelledLeaderAt(suite.kube.requests, podB), { timeout: 5_000 }).toBeDefined();
    const labelledAt = labelledLeaderAt(suite.kube.requests, podB);
    const leaderlessMs = (labelledAt ?? 0) - deletedAt;
    console.log(
      `[deletion handover] ${prefix}: the new leader labelled ${leaderlessMs} ms after the deletion`,
    );
    // Still running: the SIGTERM has not come yet.
    expect(a.child.exitCode).toBeNull();
    await expect.poll(() => suite.role(podA), { timeout: NO_SIGTERM_MS }).toBe("follower");
    // Never two pods labelled leader: a's label came off before b's went on.
    await expect
      .poll(() => labelEvents(suite.kube.requests, new Map()).some((s) => s.pod === podA && !s.leader), {
        timeout: 5_000,
      })
      .toBe(true);
    const shown = labelEvents(suite.kube.requests, new Map());
    const demoted = shown.findIndex((s) => s.pod === podA && !s.leader);
    const labelled = shown.findIndex((s) => s.pod === podB && s.leader);
    expect(demoted).toBeGreaterThanOrEqual(0);
    expect(demoted).toBeLessThan(labelled);
    return { a, b, podA, podB };
  }

  /** The kubelet's SIGTERM after the handover: one shutdown, exit 0, the lease released once. */
  async function sigtermAfterHandover(
    a: { stop(): Promise<{ code: number | null; stdout: string }> },
    lease: string,
  ) {
    const exit = await a.stop();
    expect(exit.code).toBe(0);
    expect(exit.stdout.match(new RegExp(`released lease ${lease} \\(fence \\d+\\)`, "g"))).toHaveLength(1);
    expect(exit.stdout.match(new RegExp(`acquired lease ${lease} with fence`, "g"))).toHaveLength(1);
    expect(exit.stdout.match(/"msg":"stopped"/g)).toHaveLength(1);
  }

  it("with peer demotion, the follower leads before any SIGTERM; the SIGTERM then stops the old leader once", async () => {
    const since = Date.now();
    const { a, b, podA, podB } = await deleteLeaderPod("peer", "deleted-peer", LONG);
    // The new leader alone demoted the deleted pod: its own sidecar sent nothing to it.
    expect(ownPatches(suite.kube.requests, podA, since)).toEqual([]);
    await sigtermAfterHandover(a, "deleted-peer");
    expect(await suite.role(podB)).toBe("leader");
    expect(b.output()).not.toMatch(/released lease deleted-peer/);
  });

  it("without peer demotion, the leader's demotion still comes first, before any SIGTERM", async () => {
    const { a } = await deleteLeaderPod("own", "deleted-own", [...LONG, "--no-peer-demotion"]);
    await sigtermAfterHandover(a, "deleted-own");
  });

  it("with peer demotion, a SIGTERM right after the deletion still leaves the demotion to the new leader", async () => {
    // A native sidecar's SIGTERM comes once the application exited: in the real cluster often
    // before the new leader's demotion of this pod (its claim, its list, then its patches).
    const { a, b } = await suite.pair("early", "deleted-early", LABELS, LONG);
    suite.kube.clearRequests();
    await suite.kube.deletePod(NS, "early-a", 30);
    await a.waitForLog(/pod early-a is being deleted/, NO_SIGTERM_MS);
    const exit = await a.stop();
    expect(exit.code).toBe(0);
    await b.waitForLog(/^acquired lease deleted-early with fence \d+$/, NO_SIGTERM_MS);
    await expect.poll(() => suite.role("early-b"), { timeout: NO_SIGTERM_MS }).toBe("leader");
    expect(await suite.role("early-a")).toBe("follower");
    expect(ownPatches(suite.kube.requests, "early-a", 0)).toEqual([]);
  });

  it("with peer demotion and no other pod, the deleted leader demotes its pod without waiting for the SIGTERM", async () => {
    // Another instance: the pods of the tests above are peers of LABELS, and still there.
    await seedWorkloadPod(
      suite.kube,
      NS,
      "alone-a",
      { ...LABELS, "app.kubernetes.io/instance": "alone" },
      true,
    );
    const { run } = await suite.sidecar("alone-a", "deleted-alone", LONG);
    await run.waitForLog(/^acquired lease deleted-alone with fence \d+$/);
    await expect.poll(() => suite.role("alone-a"), { timeout: 10_000 }).toBe("leader");
    suite.kube.clearRequests();
    await suite.kube.deletePod(NS, "alone-a", 30);
    await run.waitForLog(/^released lease deleted-alone \(fence \d+\)$/, NO_SIGTERM_MS);
    // Nobody else can take the label off, and a preStop hook (or the application's own stop) can
    // hold the SIGTERM back for minutes: the pod that released its lease must not keep saying
    // `leader` to its application (its downward API files) or to a Service that publishes
    // not-ready addresses all that time. The old code kept the label until the SIGTERM.
    await expect.poll(() => suite.role("alone-a"), { timeout: NO_SIGTERM_MS }).toBe("follower");
    expect(run.child.exitCode).toBeNull();
    expect((await run.stop()).code).toBe(0);
    expect(await suite.role("alone-a")).toBe("follower");
  });

  it("with peer demotion and a peer that never claims, the deleted leader demotes its pod itself without the SIGTERM", async () => {
    // A peer that is not being deleted but never claims (unhealthy, not eligible, its sidecar not
    // started): nobody takes the label off, and the SIGTERM may be minutes away (a preStop hook).
    const labels = { ...LABELS, "app.kubernetes.io/instance": "idle" };
    await seedWorkloadPod(suite.kube, NS, "idle-a", labels, true);
    await seedWorkloadPod(suite.kube, NS, "idle-b", labels, true);
    // --grace-period 8s: a step's budget of 2 s, half of it 1 s for the new leader that never comes.
    const { run } = await suite.sidecar("idle-a", "deleted-idle", [
      "--duration",
      "10s",
      "--grace-period",
      "8s",
    ]);
    await run.waitForLog(/^acquired lease deleted-idle with fence \d+$/);
    await expect.poll(() => suite.role("idle-a"), { timeout: 10_000 }).toBe("leader");
    await suite.kube.deletePod(NS, "idle-a", 30);
    await run.waitForLog(/^released lease deleted-idle \(fence \d+\)$/, NO_SIGTERM_MS);
    // The old code kept the label until the SIGTERM, however late.
    await expect.poll(() => suite.role("idle-a"), { timeout: NO_SIGTERM_MS }).toBe("follower");
    expect(run.child.exitCode).toBeNull();
    expect((await run.stop()).code).toBe(0);
  });

  it("a follower whose pod is being deleted campaigns no more", async () => {
    const { a, b } = await suite.pair("quit", "deleted-follower", LABELS, LONG);
    await suite.kube.deletePod(NS, "quit-b", 30);
    // It withdraws its candidacy: no handover targets it, no claim of its comes.
    await expect
      .poll(() => candidatePods("deleted-follower"), { timeout: NO_SIGTERM_MS })
      .toEqual(["quit-a"]);
    expect(b.output()).toMatch(/pod quit-b is being deleted/);
    // a stops (SIGTERM) and releases: a follower still campaigning would claim within milliseconds.
    expect((await a.stop()).code).toBe(0);
    expect(a.output()).toMatch(/released lease deleted-follower \(fence \d+\)/);
    await new Promise((resolve) => setTimeout(resolve, 1_500));
    expect(b.output()).not.toMatch(/acquired lease deleted-follower/);
    expect((await b.stop()).code).toBe(0);
  });
});
