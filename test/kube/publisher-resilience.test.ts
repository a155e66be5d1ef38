import { afterEach, describe, expect, it } from "vitest";
import { onEachKubeServer } from "../support/kube-server-suites.ts";
import type { KubeServerKind } from "../support/kube-servers.ts";
import {
  follower,
  type Harness,
  leader,
  leaderCondition,
  NAMESPACE,
  POD,
  patchesOf,
  role,
  startHarness,
  until,
} from "./publisher-harness.ts";

let h: Harness;
afterEach(async () => {
  await h?.close();
});

const WATCH = { watch: true } as const;

async function startedAsLeader(
  kube: KubeServerKind,
  options: Parameters<typeof startHarness>[1] = {},
): Promise<void> {
  h = await startHarness(kube, options);
  await h.publisher.start(follower());
  h.publisher.setDesired(leader(11));
  await until("leader on the pod", () => h.publisher.state().published);
  await h.server.waitForWatches(1);
}

await onEachKubeServer("publisher resilience suite", (kube) => {
  describe("changes made by hand", () => {
    it("puts back a removed label, a changed annotation and a flipped condition, seen through the watch", async () => {
      await startedAsLeader(kube);
      const gets = () => h.server.requests.filter((r) => r.verb === "get").length;
      const getsBefore = gets();

      await h.server.mutatePod(NAMESPACE, POD, (pod) => {
        delete pod.metadata?.labels?.["pglease.io/role"];
      });
      await until("the role label back", async () => role(await h.pod()) === "leader");

      await h.server.mutatePod(NAMESPACE, POD, (pod) => {
        if (pod.metadata?.annotations) pod.metadata.annotations["pglease.io/fence"] = "1";
      });
      await until(
        "the fence back",
        async () => (await h.pod()).metadata?.annotations?.["pglease.io/fence"] === "11",
      );

      await h.server.mutatePod(NAMESPACE, POD, (pod) => {
        const condition = leaderCondition(pod);
        if (condition) condition.status = "False";
      });
      await until("the condition back", async () => leaderCondition(await h.pod())?.status === "True");
      expect(gets()).toBe(getsBefore);
    });

    it("re-establishes a dropped watch and catches up with what changed meanwhile", async () => {
      await startedAsLeader(kube);
      h.server.faults.failNext({ match: WATCH, status: 500, count: 2 });
      expect(h.server.faults.dropWatches()).toBe(1);
      await h.server.mutatePod(NAMESPACE, POD, (pod) => {
        delete pod.metadata?.labels?.["pglease.io/role"];
      });
      await until("the role label back", async () => role(await h.pod()) === "leader");
      await h.server.waitForWatches(1);
      const watches = h.server.requests.filter((r) => r.verb === "watch");
      expect(watches.length).toBeGreaterThanOrEqual(4);
      expect(watches.every((w) => w.query.fieldSelector === `metadata.name=${POD}`)).toBe(true);

      // The new watch works on its own: another change by hand is put back without a resync.
      await h.server.mutatePod(NAMESPACE, POD, (pod) => {
        delete pod.metadata?.labels?.["pglease.io/role"];
      });
      await until("the role label back again", async () => role(await h.pod()) === "leader");
    });

    it("resyncs with a GET when no watch can be opened at all", async () => {
      await startedAsLeader(kube, { config: { resyncIntervalMs: 100 } });
      h.server.faults.failNext({ match: WATCH, status: 503, count: 10_000 });
      h.server.faults.dropWatches();
      await h.server.mutatePod(NAMESPACE, POD, (pod) => {
        delete pod.metadata?.labels?.["pglease.io/role"];
      });
      await until("the role label back through the resync", async () => role(await h.pod()) === "leader");
      expect(h.server.openWatches).toBe(0);
    });
  });

  describe("an unreliable API server", () => {
    it("ends with the pod showing the final state after a flapping elector, under latency", async () => {
      h = await startHarness(kube);
      await h.publisher.start(follower());
      h.server.faults.setLatency({ match: { method: "PATCH" }, ms: 15 });
      h.server.clearRequests();
      for (let i = 1; i <= 50; i++) {
        h.publisher.setDesired(i % 2 === 1 ? leader(i) : follower("orders-1-x"));
      }
      h.publisher.setDesired(leader(51));
      await until("the final state on the pod", () => h.publisher.state().published, 5_000);
      const pod = await h.pod();
      expect(role(pod)).toBe("leader");
      expect(pod.metadata?.annotations?.["pglease.io/fence"]).toBe("51");
      expect(leaderCondition(pod)?.message).toBe("holds lease orders-sync with fence 51");
      // Coalesced: far fewer patches than the 102 that publishing every state would take.
      expect(patchesOf(h.server).length).toBeLessThan(20);
    });

    it("never blocks setDesired during a 5xx storm, and converges when it ends", async () => {
      h = await startHarness(kube);
      await h.publisher.start(follower());
      h.server.faults.failNext({ match: { method: "PATCH" }, status: 500, count: 100_000 });
      const durations: number[] = [];
      const flip = async (count: number) => {
        for (let i = 1; i <= count; i++) {
          const started = performance.now();
          h.publisher.setDesired(i % 2 === 1 ? leader(i) : follower());
          durations.push(performance.now() - started);
          // Let the worker run between calls, so setDesired is measured while it is failing.
          if (i % 20 === 0) await new Promise((resolve) => setImmediate(resolve));
        }
      };
      await flip(201);
      await until("a few failed patches", () => h.patches.filter((p) => !p.ok).length >= 5);
      await flip(201);
      // It returns nothing to wait on and never waits on a request (a round trip is milliseconds):
      // the typical call takes microseconds; the bound on the slowest leaves room for GC on a busy host.
      durations.sort((a, b) => a - b);
      expect(durations[Math.floor(durations.length / 2)]).toBeLessThan(0.5);
      expect(durations.at(-1)).toBeLessThan(200);
      expect(h.publisher.setDesired(leader(999))).toBeUndefined();
      h.publisher.setDesired(leader(201));
      await until("the final state failing", () => h.publisher.state().lastError !== undefined);
      expect(h.publisher.state()).toEqual({
        published: false,
        lastError: expect.stringContaining("HTTP 500"),
      });
      expect(h.patches.find((p) => !p.ok)).toMatchObject({ ok: false, status: 500 });
      expect(h.logs.some((l) => l.level === 40 && l.msg.includes("retrying with backoff"))).toBe(true);

      h.server.faults.clear();
      await until("the final state on the pod", () => h.publisher.state().published);
      expect(role(await h.pod())).toBe("leader");
      expect((await h.pod()).metadata?.annotations?.["pglease.io/fence"]).toBe("201");
      expect(h.publisher.state().lastError).toBeUndefined();
    });

    it("times out hung requests, keeps setDesired instant, and converges once they are released", async () => {
      h = await startHarness(kube, { timing: { requestTimeoutMs: 300 } });
      await h.publisher.start(follower());
      const held = h.server.faults.hang({ match: { method: "PATCH" } });
      const started = performance.now();
      h.publisher.setDesired(leader(2));
      h.publisher.setDesired(follower());
      h.publisher.setDesired(leader(3));
      // A wait on the hung request would take the 300 ms request timeout; 50 ms leaves room for a busy host.
      expect(performance.now() - started).toBeLessThan(50);
      await held.waitForHeld(2);
      expect(h.publisher.state().lastError).toMatch(/timed out/);
      held.release();
      await until("leader 3 on the pod", () => h.publisher.state().published);
      expect((await h.pod()).metadata?.annotations?.["pglease.io/fence"]).toBe("3");
    });

    it("retries a 409 quietly", async () => {
      h = await startHarness(kube);
      await h.publisher.start(follower());
      h.server.faults.failNext({ match: { method: "PATCH" }, status: 409, count: 2 });
      h.publisher.setDesired(leader(4));
      await until("leader on the pod", () => h.publisher.state().published);
      expect(h.patches.filter((p) => p.status === 409)).toHaveLength(2);
      expect(h.logs.filter((l) => l.level >= 40)).toEqual([]);
    });

    it("survives the API server going down and coming back", async () => {
      await startedAsLeader(kube);
      await h.server.faults.goDown();
      h.publisher.setDesired(follower());
      await until("a failed attempt", () => h.publisher.state().lastError !== undefined);
      await h.server.faults.comeBack();
      await until("follower on the pod", () => h.publisher.state().published);
      expect(role(await h.pod())).toBe("follower");
      await h.server.waitForWatches(1);
    });
  });

  describe("stop", () => {
    it("returns within a bound while requests hang, and sends nothing afterwards", async () => {
      await startedAsLeader(kube, { config: { resyncIntervalMs: 20 }, timing: { requestTimeoutMs: 300 } });
      const held = h.server.faults.hang();
      h.publisher.setDesired(follower());
      h.server.faults.dropWatches();
      await held.waitForHeld(2);
      const started = performance.now();
      await h.publisher.stop();
      // At most one request timeout, spent giving the LeadershipLost event its chance.
      expect(performance.now() - started).toBeLessThan(1_000);
      const stoppedAt = Date.now();
      await h.server.mutatePod(NAMESPACE, POD, (pod) => {
        delete pod.metadata?.labels?.["pglease.io/role"];
      });
      // Ten resync intervals: a publisher still running would have sent GETs and a PATCH by now.
      // A request aborted by stop() may still land in the first milliseconds; none may come later.
      await new Promise((resolve) => setTimeout(resolve, 200));
      expect(h.server.requests.filter((r) => r.at > stoppedAt + 50)).toEqual([]);
      expect(h.server.openWatches).toBe(0);
      expect(role(await h.pod())).toBeUndefined();
    });
  });
});
