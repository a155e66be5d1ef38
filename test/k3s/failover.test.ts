// The chart on a real cluster: K3s and PostgreSQL in containers, the pglease image built from
// the repository's Dockerfile, three replicas. Checks what only a real kubelet, EndpointSlice
// controller and PostgreSQL show together: one leader routed to by the leader Service, failover
// by lease expiry when the leader dies, handover at once (release + NOTIFY) on a graceful stop.
// Runs wherever a container runtime answers; elsewhere it says so in one line and skips in well
// under a second (the heavy modules are loaded only once the runtime answered).
import type pg from "pg";
import { afterAll, beforeAll, describe, expect, it, onTestFailed } from "vitest";
import { skipBecause } from "../support/skip.ts";
import { CleanupStack } from "./cleanup-stack.ts";
import type * as EnvironmentModule from "./cluster-environment.ts";
import type { ClusterEnvironment } from "./cluster-environment.ts";
import { probeContainerRuntime } from "./container-runtime-probe.ts";
import type * as LeadershipViewModule from "./leadership-view.ts";
import type { LeadershipReader, PodView, Settled } from "./leadership-view.ts";
import type * as LeaseRowModule from "./lease-row.ts";
import { pollUntil } from "./poll.ts";

const probeStartedAt = performance.now();
const runtime = await probeContainerRuntime();
const took = ((performance.now() - probeStartedAt) / 1000).toFixed(2);
const skip = skipBecause("k3s suite", !runtime.available && `${runtime.reason} (probe took ${took} s)`);

const NAMESPACE = "pglease-k3s";
// Image build on a cold cache, K3s start and image import: minutes, but bounded.
const SETUP_TIMEOUT_MS = 15 * 60_000;
const TEARDOWN_TIMEOUT_MS = 3 * 60_000;
const FIRST_ELECTION_TIMEOUT_MS = 3 * 60_000;
// Slack over the lease duration for a failover by expiry: the follower's claim at the observed
// expiry, its label patch, and the EndpointSlice controller's update.
const FAILOVER_SLACK_MS = 5_000;

describe.skipIf(skip)("pglease on a real cluster (K3s)", { timeout: 4 * 60_000 }, () => {
  const cleanup = new CleanupStack();
  let env: ClusterEnvironment;
  let reader: LeadershipReader;
  let database: pg.Client;
  let leaseDurationMs: number;
  let replicas: number;
  let lib: {
    environment: typeof EnvironmentModule;
    view: typeof LeadershipViewModule;
    lease: typeof LeaseRowModule;
  };
  /** Every term seen, in order, for the Events check. */
  const terms: { pod: string; fence: string }[] = [];

  beforeAll(async () => {
    const [environment, release, view, lease, kube, pgModule] = await Promise.all([
      import("./cluster-environment.ts"),
      import("./pglease-release.ts"),
      import("./leadership-view.ts"),
      import("./lease-row.ts"),
      import("@kubernetes/client-node"),
      import("pg"),
    ]);
    lib = { environment, view, lease };
    leaseDurationMs = release.LEASE_DURATION_MS;
    replicas = release.REPLICAS;

    env = await environment.startClusterEnvironment(cleanup);
    database = new pgModule.default.Client({ connectionString: env.databaseUrlForTests });
    await database.connect();
    cleanup.add("database client", () => database.end());

    const kubeConfig = new kube.KubeConfig();
    kubeConfig.loadFromString(env.kubeConfigYaml);
    const installed = await release.installRelease(kubeConfig, {
      namespace: NAMESPACE,
      image: env.image,
      databaseUrl: env.databaseUrlForPods,
    });
    reader = view.createLeadershipReader(kubeConfig, installed);
  }, SETUP_TIMEOUT_MS);

  afterAll(() => cleanup.close(), TEARDOWN_TIMEOUT_MS);

  function printSidecarLogsOnFailure(): void {
    onTestFailed(async () => {
      console.log(`[k3s suite] sidecar logs:\n${await reader.sidecarLogs()}`);
    }, 30_000);
  }

  async function waitForSettled(timeoutMs: number): Promise<Settled> {
    const { value } = await reader.waitFor(`one leader among ${replicas} ready pods`, timeoutMs, (view) =>
      lib.view.settledLeadership(view, replicas),
    );
    return value;
  }

  /** Polls until a pod other than `previous` is labelled leader and the leader Service routes to it alone. */
  async function waitForSuccessor(previous: PodView, startedAt: number, onView?: (leaders: number) => void) {
    let labelledAt: number | undefined;
    const { value: successor, at: routedAt } = await reader.waitFor(
      `a leader other than ${previous.name} behind the leader Service`,
      leaseDurationMs + 30_000,
      (view) => {
        onView?.(view.pods.filter((pod) => pod.role === "leader").length);
        const next = view.pods.find((pod) => pod.role === "leader" && pod.name !== previous.name);
        if (!next) return undefined;
        labelledAt ??= performance.now();
        return view.leaderEndpoints.length === 1 && view.leaderEndpoints[0] === next.name ? next : undefined;
      },
    );
    return { successor, labelledMs: (labelledAt ?? routedAt) - startedAt, routedMs: routedAt - startedAt };
  }

  it("elects one leader: labelled, fenced, the condition True on it alone, the only endpoint of the leader Service", async () => {
    printSidecarLogsOnFailure();
    const { leader, followers, lease } = await waitForSettled(FIRST_ELECTION_TIMEOUT_MS);
    const view = await reader.view();

    expect(view.pods.filter((pod) => pod.role === "leader").map((pod) => pod.name)).toEqual([leader.name]);
    expect(followers).toHaveLength(replicas - 1);
    expect(leader.fence).toMatch(/^\d+$/);
    for (const pod of view.pods) {
      expect(pod.leaderCondition, pod.name).toBe(pod.name === leader.name ? "True" : "False");
    }
    expect(view.leaderEndpoints).toEqual([leader.name]);

    // The pod shows the term PostgreSQL holds.
    const row = await lib.lease.readLease(database, lease);
    expect(row.holder).toBe(leader.holder);
    expect(row.fence).toBe(leader.fence);
    terms.push({ pod: leader.name, fence: row.fence });
  });

  it("replaces a crashed leader by lease expiry: another pod leads with a higher fence and the Service follows", async () => {
    printSidecarLogsOnFailure();
    const { leader, lease } = await waitForSettled(60_000);
    if (!leader.sidecarContainerId) throw new Error(`no sidecar container id in ${leader.name}'s status`);

    // A crash, not a shutdown: SIGKILL through the node's runtime (crictl stop with no grace),
    // so nothing releases the lease; a force delete alone still lets the kubelet send SIGTERM.
    const crashedAt = performance.now();
    await lib.environment.execInNode(env.k3s, [
      "crictl",
      "stop",
      "--timeout",
      "0",
      leader.sidecarContainerId,
    ]);
    const dead = await lib.lease.readLease(database, lease);
    await reader.deletePod(leader.name, 0);
    expect(dead.holder).toBe(leader.holder);

    const { successor, labelledMs, routedMs } = await waitForSuccessor(leader, crashedAt);
    console.log(
      `[k3s suite] crash failover: new leader labelled after ${(labelledMs / 1000).toFixed(1)} s, ` +
        `leader Service routed to it after ${(routedMs / 1000).toFixed(1)} s (lease ${leaseDurationMs / 1000} s)`,
    );
    expect(routedMs).toBeLessThanOrEqual(leaseDurationMs + FAILOVER_SLACK_MS);
    expect(Number(successor.fence)).toBeGreaterThan(Number(leader.fence));

    // The new term began no earlier than the dead holder's lease ran out, by the server's clock.
    const term = await lib.lease.readLease(database, lease);
    expect([term.holder, term.fence]).toEqual([successor.holder, successor.fence]);
    expect(await lib.lease.isNotBefore(database, term.acquiredAt, dead.expiresAt)).toBe(true);
    terms.push({ pod: successor.name, fence: term.fence });

    // The Deployment's replacement joins as a follower.
    const after = await waitForSettled(60_000);
    expect(after.leader.name).toBe(successor.name);
  });

  it("hands over at once when the leader stops gracefully (release + NOTIFY), never two leaders at a time", async () => {
    printSidecarLogsOnFailure();
    const { leader, lease } = await waitForSettled(60_000);
    const before = await lib.lease.readLease(database, lease);
    expect(before.holder).toBe(leader.holder);

    let mostLeadersInOneView = 0;
    const stoppedAt = performance.now();
    await reader.deletePod(leader.name);
    const { successor, labelledMs, routedMs } = await waitForSuccessor(leader, stoppedAt, (leaders) => {
      mostLeadersInOneView = Math.max(mostLeadersInOneView, leaders);
    });
    console.log(
      `[k3s suite] graceful handover: new leader labelled after ${(labelledMs / 1000).toFixed(1)} s, ` +
        `leader Service routed to it after ${(routedMs / 1000).toFixed(1)} s (lease ${leaseDurationMs / 1000} s)`,
    );
    // The old leader demotes itself before it releases, so a pod list never shows two leaders.
    expect(mostLeadersInOneView).toBeLessThanOrEqual(1);
    expect(labelledMs).toBeLessThan(leaseDurationMs);
    expect(Number(successor.fence)).toBeGreaterThan(Number(leader.fence));

    // Released, not expired: the new term began before the old one's expiry as last read.
    const term = await lib.lease.readLease(database, lease);
    expect([term.holder, term.fence]).toEqual([successor.holder, successor.fence]);
    expect(await lib.lease.isNotBefore(database, term.acquiredAt, before.expiresAt)).toBe(false);
    terms.push({ pod: successor.name, fence: term.fence });
  });

  it("records a LeaderElected Event with the fence on the pod of every term", async () => {
    printSidecarLogsOnFailure();
    expect(terms).toHaveLength(3);
    let seen: { pod: string | undefined; message: string }[] = [];
    // Events are sent best effort after the labels: give them a moment.
    await pollUntil(
      "a LeaderElected Event for every term",
      15_000,
      async () => {
        seen = await reader.events("LeaderElected");
        const missing = terms.filter(
          (term) =>
            !seen.some(
              (event) => event.pod === term.pod && event.message.endsWith(`with fence ${term.fence}`),
            ),
        );
        return missing.length === 0 ? true : undefined;
      },
      () => `terms ${JSON.stringify(terms)}; events ${JSON.stringify(seen)}`,
    );
  });
});
