import { afterEach, describe, expect, it } from "vitest";
import { onEachKubeServer } from "../support/kube/kube-server-suites.ts";
import type { KubeServerKind } from "../support/kube/kube-servers.ts";
import { ManualClock } from "../support/manual-clock.ts";
import {
  follower,
  type Harness,
  leader,
  leaderCondition,
  NAMESPACE,
  POD,
  patchesOf,
  role,
  settled,
  startHarness,
  until,
} from "./publisher-harness.ts";

let h: Harness;
afterEach(async () => {
  await h?.close();
});

const WATCH = { watch: true } as const;
/** The watch of its own pod (the peer view's has a label selector). */
const OWN_WATCH = (r: { watch: boolean; query: URLSearchParams }) =>
  r.watch && r.query.get("fieldSelector") === `metadata.name=${POD}`;

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
      h.server.faults.failNext({ match: OWN_WATCH, status: 500, count: 2 });
      expect(h.server.faults.dropWatches({ match: OWN_WATCH })).toBe(1);
      await h.server.mutatePod(NAMESPACE, POD, (pod) => {
        delete pod.metadata?.labels?.["pglease.io/role"];
      });
      await until("the role label back", async () => role(await h.pod()) === "leader");
      await h.server.waitForWatches(1);
      const watches = h.server.requests.filter((r) => r.verb === "watch" && r.query.fieldSelector);
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

    it("keeps setDesired synchronous during a 5xx storm, retries on its clock's backoff, and converges", async () => {
      const clock = new ManualClock();
      // No jitter: retry n waits 5, 10, 20, 40 s, then the cap (80 s, halved by zero jitter). Real
      // time would not get past the first retry within the test.
      const backoff = { initialMs: 10_000, maxMs: 80_000 };
      h = await startHarness(kube, { clock, random: () => 0, timing: { backoff } });
      await h.publisher.start(follower());
      h.server.faults.failNext({ match: { method: "PATCH" }, status: 500, count: 100_000 });
      const failed = () => h.patches.filter((p) => !p.ok).length;
      for (let i = 1; i <= 201; i++) {
        const state = i % 2 === 1 ? leader(i) : follower();
        expect(h.publisher.setDesired(state)).toBeUndefined();
        // Recorded before any request could have gone out: the pod still shows the start state.
        expect(h.publisher.state().published).toBe(state.role === "follower");
        if (i % 20 === 0) await new Promise((resolve) => setImmediate(resolve));
      }
      await until("a failed patch", () => failed() >= 1);
      // Each retry now waits for the clock; 40 s covers every delay up to the cap.
      for (let n = failed() + 1, end = n + 6; n < end; n++) {
        clock.advance(40_000);
        await until(`failure ${n}`, () => failed() >= n);
      }
      expect(h.publisher.state()).toEqual({
        published: false,
        lastError: expect.stringContaining("HTTP 500"),
      });
      expect(h.patches.find((p) => !p.ok)).toMatchObject({ ok: false, status: 500 });
      expect(h.logs.some((l) => l.level === "warn" && l.msg.includes("retrying with backoff"))).toBe(true);

      h.server.faults.clear();
      clock.advance(40_000);
      await until("the final state on the pod", () => h.publisher.state().published);
      expect(role(await h.pod())).toBe("leader");
      expect((await h.pod()).metadata?.annotations?.["pglease.io/fence"]).toBe("201");
      expect(h.publisher.state().lastError).toBeUndefined();
    });

    it("times a hung request out on its clock, never waits in setDesired, and converges once released", async () => {
      const clock = new ManualClock();
      // A timeout left to real time would outlast the test.
      h = await startHarness(kube, { clock, timing: { requestTimeoutMs: 60_000 } });
      await h.publisher.start(follower());
      const held = h.server.faults.hang({ match: { method: "PATCH" } });
      h.publisher.setDesired(leader(2));
      await held.waitForHeld(1);
      // The worker is stuck in that request: calls that waited on it would never return.
      h.publisher.setDesired(follower());
      h.publisher.setDesired(leader(3));
      expect(h.publisher.state()).toEqual({ published: false });
      clock.advance(60_000);
      await until("the timeout", () => /timed out/.test(h.publisher.state().lastError ?? ""));
      clock.advance(80);
      await held.waitForHeld(2);
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
      expect(h.logs.filter((l) => l.level !== "debug" && l.level !== "info")).toEqual([]);
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
    it("returns at its bound on its clock while requests hang, and leaves nothing scheduled", async () => {
      const clock = new ManualClock();
      await startedAsLeader(kube, {
        clock,
        config: { resyncIntervalMs: 20 },
        timing: { requestTimeoutMs: 60_000 },
      });
      const held = h.server.faults.hang();
      h.publisher.setDesired(follower());
      h.server.faults.dropWatches();
      await held.waitForHeld(2);
      const stopping = h.publisher.stop();
      // It gives the LeadershipLost event, held like everything else, one request timeout.
      clock.advance(59_999);
      expect(await settled(stopping)).toBe(false);
      clock.advance(1);
      await stopping;
      // No resync, backoff, retry or request timeout left to fire, and no watch open: nothing can send.
      expect(clock.pendingTimers()).toBe(0);
      await until("the watch closed", () => h.server.openWatches === 0);
    });
  });
});
