// One lease across two Kubernetes clusters, end to end: two real kube-apiservers (two processes),
// real `pglease run` sidecars with --cluster-name in pods of each, one real PostgreSQL. Whatever
// fails, exactly one pod across both clusters ends up labelled leader, the lease's holder, and
// every campaigning pod names the cluster that leads.
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { crossClusterLabels } from "../chaos/cluster-labels.ts";
import { kubeTools } from "../support/kube/chart.ts";
import { realKubeApiServerAvailable } from "../support/kube/real-kube-apiserver.ts";
import { createTestDatabase, type TestDatabase } from "../support/postgres/database.ts";
import { skipBecause } from "../support/skip.ts";
import {
  type Cluster,
  eventually,
  freeze,
  LEADER_CLUSTER,
  pause,
  podOf,
  type Sidecar,
  startCluster,
  World,
} from "./two-clusters.ts";

const [tools, available] = await Promise.all([kubeTools(), realKubeApiServerAvailable()]);
const skip = skipBecause(
  "cross-cluster suite",
  (!tools.ok && tools.reason) || (!available.ok && available.reason),
);

const FAILOVER_MS = 60_000;
// A follower sees the new holder at the expiry it observed or its next look (200 ms here), then
// lists and patches: two seconds is that with room for a loaded two-core host.
const LABEL_GRACE_MS = 2_000;

describe.skipIf(skip)("one lease across two clusters", () => {
  let db: TestDatabase;
  let east: Cluster;
  let west: Cluster;
  let world: World | undefined;
  let thaw: (() => void) | undefined;

  beforeAll(async () => {
    db = await createTestDatabase();
    [east, west] = await Promise.all([startCluster("east"), startCluster("west")]);
  });
  afterEach(async () => {
    thaw?.();
    thaw = undefined;
    await world?.close();
  });
  afterAll(async () => {
    await Promise.allSettled([east?.server.close(), west?.server.close()]);
    await db?.drop();
  });

  /** e0 of east leads; e1 of east and w0, w1 of west follow. */
  async function eastLeads(namespace: string): Promise<Record<string, Sidecar>> {
    world = new World({ namespace, lease: `orders-${namespace}`, databaseUrl: db.url, duration: "3s" });
    await world.addCluster(east);
    await world.addCluster(west);
    const w = world;
    const e0 = await w.startPod("east", "e0");
    await eventually("e0 to lead", async () => podOf(await w.holder()) === "east/e0");
    const [e1, w0, w1] = await Promise.all([
      w.startPod("east", "e1"),
      w.startPod("west", "w0"),
      w.startPod("west", "w1"),
    ]);
    await eventually("east/e0 alone labelled leader", async () =>
      sameList(await w.labelledLeaders(), ["east/e0"]),
    );
    return { e0, e1, w0, w1 } as Record<string, Sidecar>;
  }

  async function leaderClusterOn(cluster: string, pod: string): Promise<string | undefined> {
    return (await world?.pod(cluster, pod))?.metadata?.annotations?.[LEADER_CLUSTER];
  }

  it(
    "leader killed: the lease crosses to the other cluster, and the old cluster's followers take its label off",
    async () => {
      const s = await eastLeads("killed");
      const w = world as World;
      // e1 paused: only the west pods can take the lease, so the old label is left to east's followers.
      const paused = { from: Date.now(), to: Number.POSITIVE_INFINITY };
      thaw = pause(s.e1 as Sidecar);
      await w.kill(s.e0 as Sidecar);
      await eventually(
        "a west pod to hold the lease",
        async () => (await w.holder())?.startsWith("west/") ?? false,
        FAILOVER_MS,
      );
      const westLeader = podOf(await w.holder()) as string;
      await eventually("the west leader labelled", async () =>
        (await w.labelledLeaders(["west"])).includes(westLeader),
      );
      thaw();
      thaw = undefined;
      await eventually("exactly one pod labelled leader across both clusters", async () =>
        sameList(await w.labelledLeaders(), [westLeader]),
      );
      await eventually(
        "east's pods naming west as the leading cluster",
        async () => (await leaderClusterOn("east", "e1")) === "west",
      );

      // Then the west leader dies too: a pod of either cluster leads, and still only one is labelled.
      const next = w.sidecars.find((c) => `${c.cluster}/${c.pod}` === westLeader) as Sidecar;
      await w.kill(next);
      await eventually(
        "another pod to hold the lease",
        async () => {
          const holder = podOf(await w.holder());
          return holder !== null && holder !== westLeader;
        },
        FAILOVER_MS,
      );
      const third = podOf(await w.holder()) as string;
      await eventually(`${third} alone labelled leader`, async () =>
        sameList(await w.labelledLeaders(), [third]),
      );
      // The whole run: a stale label in the other cluster only while east could not act, or briefly.
      expect(crossClusterLabels(w.labels({ east: [paused] }), await w.handOvers(), LABEL_GRACE_MS)).toEqual(
        [],
      );
    },
    4 * FAILOVER_MS,
  );

  it(
    "the leader's whole cluster killed and brought back: its stale leader label is repaired by the pods that return",
    async () => {
      const s = await eastLeads("down");
      const w = world as World;
      const down = { from: Date.now(), to: Number.POSITIVE_INFINITY };
      thaw = freeze(east);
      await Promise.all([w.kill(s.e0 as Sidecar), w.kill(s.e1 as Sidecar)]);
      await eventually(
        "a west pod to hold the lease",
        async () => (await w.holder())?.startsWith("west/") ?? false,
        FAILOVER_MS,
      );
      const westLeader = podOf(await w.holder()) as string;
      await eventually("the west leader labelled", async () =>
        sameList(await w.labelledLeaders(["west"]), [westLeader]),
      );
      thaw();
      thaw = undefined;
      // Still labelled in east's store while nothing there runs.
      expect(await w.labelledLeaders(["east"])).toEqual(["east/e0"]);
      // East comes back without e0's node: e1's new sidecar repairs the label of its cluster.
      await w.startPod("east", "e1");
      down.to = Date.now();
      await eventually("exactly one pod labelled leader across both clusters", async () =>
        sameList(await w.labelledLeaders(), [westLeader]),
      );
      expect(podOf(await w.holder())).toBe(westLeader);
      expect(await leaderClusterOn("east", "e1")).toBe("west");
      expect(crossClusterLabels(w.labels({ east: [down] }), await w.handOvers(), LABEL_GRACE_MS)).toEqual([]);
    },
    4 * FAILOVER_MS,
  );

  it(
    "one cluster cut from the database: its leader steps down, the other cluster leads, never two labelled",
    async () => {
      const s = await eastLeads("cut");
      const w = world as World;
      for (const [cluster, pod] of [
        ["east", "e1"],
        ["west", "w0"],
        ["west", "w1"],
      ]) {
        await eventually(
          `${cluster}/${pod} naming east as the leading cluster`,
          async () => (await leaderClusterOn(cluster as string, pod as string)) === "east",
        );
      }
      (s.e0 as Sidecar).db.cut();
      (s.e1 as Sidecar).db.cut();
      await eventually(
        "a west pod to hold the lease",
        async () => (await w.holder())?.startsWith("west/") ?? false,
        FAILOVER_MS,
      );
      const westLeader = podOf(await w.holder()) as string;
      await eventually(`${westLeader} alone labelled leader`, async () =>
        sameList(await w.labelledLeaders(), [westLeader]),
      );
      (s.e0 as Sidecar).db.heal();
      (s.e1 as Sidecar).db.heal();
      for (const [cluster, pod] of [
        ["east", "e0"],
        ["east", "e1"],
        ["west", "w0"],
        ["west", "w1"],
      ]) {
        await eventually(
          `${cluster}/${pod} naming west as the leading cluster`,
          async () => (await leaderClusterOn(cluster as string, pod as string)) === "west",
        );
      }
      expect(await w.labelledLeaders()).toEqual([westLeader]);
      // The cut leader demoted itself before its lease could expire: never two labelled at once.
      expect(crossClusterLabels(w.labels(), await w.handOvers(), 0)).toEqual([]);
    },
    4 * FAILOVER_MS,
  );
});

function sameList(a: string[], b: string[]): boolean {
  return JSON.stringify(a) === JSON.stringify(b);
}
