// A frozen leader (a stuck node, a long GC or VM pause): its pod's processes frozen whole by the
// cgroup v1 freezer, the sidecar and the application together. The other pod takes the lease
// once it expires, takes the frozen pod's leader label off before labelling itself, and the
// leader Service never lists two ready pods. The application is the project's own example,
// deploy/examples/fenced-reconciler, reading leadership from the downward API as the chart mounts
// it and writing through the fence guard. The freeze catches it inside its fenced write, the guard
// row locked: the guard's idle bound frees the row for the new leader, and once thawed the frozen
// pod's write fails and nothing it writes with the old fence is committed.
import { existsSync } from "node:fs";
import { readdir, readFile, writeFile } from "node:fs/promises";
import { join } from "node:path";
import pg from "pg";
import { describe, expect, it } from "vitest";
import { watchEndpoints } from "./endpoint-timeline.ts";
import { guardDrops } from "./network.ts";
import { type PodState, watchPods } from "./pod-timeline.ts";
import { releaseSuite } from "./release-suite.ts";
import { clusterSkipReason, describePods, until } from "./session.ts";

const SUITE = "cluster frozen leader";
const skip = (await clusterSkipReason(SUITE)) !== null;
const REPLICAS = 2;
const RESOURCE = "orders-sync";
const example = join(import.meta.dirname, "..", "..", "deploy", "examples", "fenced-reconciler", "main.ts");
const FREEZER = "/sys/fs/cgroup/freezer/kubepods";

// The reconciler's committed work: the row its guarded transaction writes.
const READ_STATE = "SELECT fence, runs FROM fenced_reconciler_state WHERE resource = $1";
// The test holds the reconciler's state row, so the leader's next fenced write waits inside its
// guard transaction, the guard row already advanced and locked.
const HOLD_STATE_ROW = "SELECT 1 FROM fenced_reconciler_state WHERE resource = $1 FOR UPDATE";
const WAITING_WRITERS = `SELECT count(*)::int AS n FROM pg_stat_activity
  WHERE wait_event_type = 'Lock' AND query LIKE 'INSERT INTO fenced_reconciler_state%'`;
// Sessions inside a guard transaction (its table locked) that wait for their client: the frozen
// reconciler, its write done on the server, unable to send its COMMIT.
const FROZEN_WRITERS = `SELECT count(*)::int AS n FROM pg_stat_activity a JOIN pg_locks l ON l.pid = a.pid
  WHERE a.state = 'idle in transaction' AND l.relation = 'pglease_fences'::regclass AND l.granted`;

describe.skipIf(skip)("a frozen leader in a real cluster", () => {
  let db: pg.Client;
  const cluster = releaseSuite({
    suite: SUITE,
    replicas: REPLICAS,
    async values(base, namespace) {
      db = new pg.Client({ connectionString: cluster.database.url });
      await db.connect();
      // The example as a user's program imports it: the package by its name (the image's /app is
      // the package, so the import resolves to its own build), not the repository's source.
      const source = (await readFile(example, "utf8")).replace('"../../../src/index.ts"', '"pglease"');
      const configMap = {
        apiVersion: "v1",
        kind: "ConfigMap",
        metadata: { name: "fenced-reconciler" },
        data: { "main.ts": source },
      };
      await cluster.session.kubectl(["apply", "-n", namespace, "-f", "-"], JSON.stringify(configMap));
      return {
        ...base,
        workload: {
          ...base.workload,
          volumes: [{ name: "reconciler", configMap: { name: "fenced-reconciler" } }],
        },
        app: {
          ...base.app,
          command: ["node", "/app/reconciler/main.ts"],
          env: [
            { name: "DATABASE_URL", value: cluster.bridge.podUrl },
            // The downward API folder the chart mounts (LEADER_INFO_DIR): what a paused pod last saw.
            { name: "FENCE_SOURCE", value: "downward-api" },
            { name: "RECONCILE_INTERVAL_MS", value: "250" },
          ],
          volumeMounts: [{ name: "reconciler", mountPath: "/app/reconciler" }],
        },
        sidecar: {
          ...base.sidecar,
          // A frozen sidecar fails its liveness probe; the kubelet's restart would be a different
          // scenario (the crash one): here the pod thaws as it froze.
          livenessProbe: {
            httpGet: { path: "/healthz", port: "pglease" },
            periodSeconds: 10,
            timeoutSeconds: 2,
            failureThreshold: 30,
          },
        },
      };
    },
    cleanUp: async () => db?.end(),
  });
  const { figures } = cluster;

  const count = async (sql: string) => (await db.query<{ n: number }>(sql)).rows[0]?.n ?? 0;
  const waiting = () => count(WAITING_WRITERS);
  const frozenWriters = () => count(FROZEN_WRITERS);
  const committed = async () => {
    const { rows } = await db.query(READ_STATE, [RESOURCE]);
    return rows[0] ? { fence: Number(rows[0].fence), runs: Number(rows[0].runs) } : null;
  };

  it("replaces a leader frozen inside its fenced write at the expiry, takes its label, and commits nothing of the frozen pod's after the thaw", async () => {
    const pods = await watchPods(cluster.release.namespace, cluster.selector);
    const endpoints = await watchEndpoints(cluster.release.namespace, cluster.release.leaderService);
    let freezer: string | undefined;
    try {
      const steady = await pods
        .waitFor((list) => {
          const up = list.filter((p) => !p.gone);
          return (
            up.length === REPLICAS &&
            up.every((p) => p.ready) &&
            up.filter((p) => p.role === "leader").length === 1
          );
        }, 180_000)
        .catch(async (error: Error) => {
          throw new Error(
            `${error.message}\n${await describePods(cluster.session, cluster.release.namespace, cluster.selector)}`,
          );
        });
      const frozen = steady.pods.find((p) => p.role === "leader") as PodState;
      const oldFence = frozen.fence ?? 0;
      // The leader's reconciler writes with its fence once its downward API files say it leads.
      await until("the leader's reconciler writing", 180_000, committed, (c) => c?.fence === oldFence);
      await endpoints.waitFor((r) => r.join() === frozen.name, 60_000);

      const uid = await cluster.session.kubectl([
        "get",
        "pod",
        frozen.name,
        "-n",
        cluster.release.namespace,
        "-o",
        "jsonpath={.metadata.uid}",
      ]);
      freezer = await podFreezer(uid);
      // The freeze catches the leader inside its fenced transaction, holding the guard row (the
      // worst moment, which a freeze at random hits a few times in a hundred): its write waits for
      // the row the test holds, the pod freezes, the test lets go, and the write completes on the
      // server with the frozen process unable to commit. Only the guard's idle bound
      // (idleInTransactionTimeoutMs, 10 s by default) then frees the guard row for the next leader.
      const holder = new pg.Client({ connectionString: cluster.database.url });
      await holder.connect();
      let frozenAt: number;
      try {
        await holder.query("BEGIN");
        await holder.query(HOLD_STATE_ROW, [RESOURCE]);
        await until(
          "the leader's write waiting inside its guard transaction",
          30_000,
          waiting,
          (n) => n === 1,
          50,
        );
        await setFreezer(freezer, "FROZEN");
        frozenAt = performance.now();
        await holder.query("COMMIT");
      } finally {
        await holder.end();
      }
      await until("the frozen writer idle inside its transaction", 10_000, frozenWriters, (n) => n === 1, 50);

      // Nothing of the frozen pod runs: the lease expires (lease.duration 15 s) and the other pod claims it.
      const taken = await pods.waitFor(
        (list) =>
          list.some((p) => p.name !== frozen.name && p.role === "leader" && (p.fence ?? 0) > oldFence),
        120_000,
      );
      const successor = taken.pods.find((p) => p.name !== frozen.name) as PodState;
      const labelledAt =
        pods.first((p) => p.name === successor.name && p.role === "leader", frozenAt)?.atMs ?? 0;
      const unlabelledAt = pods.first((p) => p.name === frozen.name && p.role !== "leader", frozenAt)?.atMs;
      // The frozen pod's stale label came off (the new leader did it: the frozen sidecar cannot) first.
      expect(unlabelledAt).toBeDefined();
      expect(unlabelledAt as number).toBeLessThanOrEqual(labelledAt);
      // The new leader's reconciler writes with the new fence.
      const newFence = successor.fence ?? 0;
      await until("the new leader's reconciler writing", 180_000, committed, (c) => c?.fence === newFence);
      const newWriteAt = performance.now();
      const runsBeforeThaw = (await committed())?.runs ?? 0;

      const thawedAt = performance.now();
      await setFreezer(freezer, "THAWED");
      freezer = undefined;
      // The thawed reconciler's caught write fails (its session ended); its next tick either tries
      // the old fence again (refused by the guard) or reads the files the kubelet rewrote meanwhile
      // (follower), whichever comes first on its thaw.
      const refused = await until(
        "the thawed pod's reconciler logging its refused write or its follower role",
        60_000,
        () =>
          cluster.session.kubectl([
            "logs",
            "-n",
            cluster.release.namespace,
            frozen.name,
            "-c",
            "app",
            "--since=2m",
          ]),
        (log) =>
          afterThaw(log).some((l) => l.message === "refused" || l.message === "follower: not reconciling"),
      );
      const thawLines = afterThaw(refused);
      // The write the freeze caught: PostgreSQL ended its session, nothing of it committed, and
      // the guard said why.
      expect(
        thawLines.some(
          (l) => l.message === "reconcile failed" && /idleInTransactionTimeoutMs/.test(l.error ?? ""),
        ),
      ).toBe(true);
      // Every write committed since the new leader's first is the new leader's, with its fence.
      const end = await committed();
      expect(end?.fence).toBe(newFence);
      expect(thawLines.filter((l) => l.message === "wrote")).toEqual([]);
      // The thawed sidecar never labels its pod leader again.
      await endpoints.waitFor((r) => r.join() === successor.name, 30_000);
      const endAt = performance.now();
      expect(pods.newLeaders(thawedAt)).toEqual([]);
      expect(endpoints.durationWhere((r) => r.length >= 2, frozenAt, endAt)).toBe(0);
      figures.frozenLeader = {
        takeoverMs: Math.round(labelledAt - frozenAt),
        frozenPodUnlabelledBeforeNewLabelMs: Math.round(labelledAt - (unlabelledAt ?? labelledAt)),
        newLeaderWroteMs: Math.round(newWriteAt - frozenAt),
        leaderlessMs: Math.round(endpoints.durationWhere((r) => r.length === 0, frozenAt, endAt)),
        twoReadyMs: Math.round(endpoints.durationWhere((r) => r.length >= 2, frozenAt, endAt)),
        fences: `${oldFence} -> ${newFence}`,
        thawedPodLog: thawLines.map((l) => l.message).slice(0, 4),
        runs: `${runsBeforeThaw} -> ${end?.runs}`,
      };

      function afterThaw(log: string) {
        // The log's own clock: lines written after the thaw (the container's stdout, time-stamped by the program).
        const thawWall = Date.now() - (performance.now() - thawedAt);
        return log
          .split("\n")
          .filter((l) => l.startsWith("{"))
          .map((l) => JSON.parse(l) as { time: string; message: string; error?: string })
          .filter((l) => Date.parse(l.time) >= thawWall - 1_000);
      }
    } finally {
      if (freezer) await setFreezer(freezer, "THAWED");
      pods.stop();
      endpoints.stop();
    }
  }, 600_000);

  it("sent nothing of the cluster's addresses out of the machine (the host guard dropped nothing)", async () => {
    expect(await guardDrops()).toBe(0);
  });
});

/** The pod's cgroup in the v1 freezer hierarchy (cgroupfs driver: kubepods[/<qos>]/pod<uid>). */
async function podFreezer(uid: string): Promise<string> {
  for (const dir of [FREEZER, ...(await readdir(FREEZER)).map((d) => join(FREEZER, d))]) {
    const candidate = join(dir, `pod${uid}`);
    if (existsSync(join(candidate, "freezer.state"))) return candidate;
  }
  throw new Error(`no freezer cgroup for pod ${uid} under ${FREEZER}`);
}

/** Writes the state and waits until the kernel reports it (FREEZING passes once every task stopped). */
async function setFreezer(cgroup: string, state: "FROZEN" | "THAWED"): Promise<void> {
  await writeFile(join(cgroup, "freezer.state"), state);
  await until(
    "the freezer's state",
    30_000,
    () => readFile(join(cgroup, "freezer.state"), "utf8"),
    (s) => s.trim() === state,
    50,
  );
}
