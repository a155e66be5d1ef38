// Crash takeover on the kubelet's report (docs/guarantees.md#crash-takeover-on-the-kubelets-report),
// with real sidecars on each API server and a real PostgreSQL: the leader's sidecar is killed
// (SIGKILL, no restart in place) and the kubelet stand-in reports its run terminated, with the
// message that run's process left in its termination message file, as the real kubelet does.
import { mkdtemp, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import pg from "pg";
import { afterAll, beforeAll, expect, it } from "vitest";
import { seedWorkloadPod } from "../support/kube/kubelet.ts";
import { type ContainerReport, kubeletPodStatus } from "../support/kube/kubelet-status.ts";
import { onEachSidecarKubeServer } from "../support/kube/sidecar-kube-suite.ts";
import type { Running } from "../support/processes/cli.ts";

const NS = "crash";
const LABELS = { "app.kubernetes.io/name": "orders", "app.kubernetes.io/instance": "crash" };
/** Far above every bound below: a takeover before it is the kubelet's report, not the expiry. */
const LONG_LEASE = "30s";

let dir = "";
beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), "pglease-termination-"));
});
afterAll(async () => {
  if (dir) await rm(dir, { recursive: true, force: true });
});

await onEachSidecarKubeServer("crash takeover", NS, (suite) => {
  let n = 0;
  /** Two pods, a's sidecar leading `lease`, b's following; each writes its own termination message file. */
  async function pair(duration: string) {
    n++;
    const lease = `crash-${n}`;
    const [podA, podB] = [`orders-${n}a`, `orders-${n}b`];
    await seedWorkloadPod(suite.kube, NS, podA, LABELS, true);
    await seedWorkloadPod(suite.kube, NS, podB, LABELS, true);
    const args = (pod: string) => ["--crash-takeover", "--termination-message-path", join(dir, pod)];
    const a = (await suite.sidecar(podA, lease, args(podA), duration)).run;
    const acquired = await a.waitForLog(new RegExp(`^acquired lease ${lease} with fence \\d+$`));
    await expect.poll(() => suite.role(podA), { timeout: 10_000 }).toBe("leader");
    const b = (await suite.sidecar(podB, lease, args(podB), duration)).run;
    await b.waitForLog(new RegExp(`^lease ${lease} is held by`));
    await expect.poll(() => suite.role(podB), { timeout: 10_000 }).toBe("follower");
    return { lease, podA, podB, a, b, holderA: String(acquired.holder) };
  }

  /** The kubelet's status write for pod `name`, its sidecar container as `sidecar` says. */
  const report = (name: string, sidecar: ContainerReport) =>
    suite.kube.mutatePod(NS, name, (pod) => {
      pod.status = kubeletPodStatus(pod, { pglease: sidecar });
    });

  async function lastChange(lease: string) {
    const client = new pg.Client({ connectionString: suite.db.url });
    await client.connect();
    try {
      const { rows } = await client.query<{ holder: string; previous_holder: string; reason: string }>(
        "SELECT holder, previous_holder, reason FROM pglease_leases_history WHERE key = $1 ORDER BY id DESC LIMIT 1",
        [lease],
      );
      return rows[0];
    } finally {
      await client.end();
    }
  }

  const killed = async (run: Running) => {
    const finished = await run.stop("SIGKILL");
    expect(finished.signal).toBe("SIGKILL");
  };

  it("the leader's sidecar killed and reported terminated by the kubelet (CrashLoopBackOff): the follower leads at once, far below the lease", async () => {
    const { lease, podA, a, b, holderA } = await pair(LONG_LEASE);
    // What the kubelet will read: the run's own file, naming its own holder.
    const message = await readFile(join(dir, podA), "utf8");
    expect(message).toBe(`pglease-holder ${holderA}\n`);
    await killed(a);
    const reportedAt = performance.now();
    await report(podA, { running: false, ended: { exitCode: 137, message } });
    await b.waitForLog(new RegExp(`^acquired lease ${lease} with fence \\d+$`), 5_000);
    const takeoverMs = performance.now() - reportedAt;
    console.log(
      `crash takeover: the follower led ${Math.round(takeoverMs)} ms after the kubelet's report (lease ${LONG_LEASE})`,
    );
    expect(takeoverMs).toBeLessThan(5_000);
    expect(await lastChange(lease)).toMatchObject({ previous_holder: holderA, reason: "crash-takeover" });
  }, 60_000);

  it("a terminated report of an earlier run (another container ID, another holder) is no witness: the dead leader is replaced at the expiry", async () => {
    const { lease, podA, a, b, holderA } = await pair("3s");
    // The run before this one: its own holder (another suffix, its lock bound earlier).
    const earlier = holderA.replace(
      /-[0-9a-f]{8}#r:([0-9a-f]{32})\.(\d+)$/,
      (_m, token: string) => `-0badc0de#r:${token}.1`,
    );
    expect(earlier).not.toBe(holderA);
    await killed(a);
    // The kubelet has not seen this run's exit yet: it still shows it running, after the earlier run's end.
    await report(podA, { restartCount: 1, ended: { exitCode: 137, message: `pglease-holder ${earlier}\n` } });
    const status = (await suite.kube.pod(NS, podA))?.status?.initContainerStatuses?.[0];
    expect(status?.lastState?.terminated?.containerID).not.toBe(status?.containerID);
    await b.waitForLog(new RegExp(`^acquired lease ${lease} with fence \\d+$`), 10_000);
    expect(b.output()).not.toContain(`"dead":"${holderA}"`);
    expect(await lastChange(lease)).toMatchObject({ previous_holder: holderA, reason: "expiry-takeover" });
  }, 60_000);

  it("the leader's pod deleted without a terminated report (a force deletion, no kubelet): the expiry, not a takeover", async () => {
    const { lease, podA, a, b, holderA } = await pair("3s");
    await killed(a);
    await suite.kube.deletePod(NS, podA, 0);
    await b.waitForLog(new RegExp(`^acquired lease ${lease} with fence \\d+$`), 10_000);
    expect(b.output()).not.toContain(`"dead":"${holderA}"`);
    expect(await lastChange(lease)).toMatchObject({ previous_holder: holderA, reason: "expiry-takeover" });
  }, 60_000);
});
