import { CoreV1Api, PatchStrategy, setHeaderOptions, type V1Pod } from "@kubernetes/client-node";
import { afterEach, describe, expect, it } from "vitest";
import { onEachKubeServer } from "../support/kube/kube-server-suites.ts";
import { roleIn } from "../support/kube/leader-timeline.ts";
import { ManualClock } from "../support/manual-clock.ts";
import {
  APP_LABELS,
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

const KUBELET_CONDITIONS = [
  "PodReadyToStartContainers",
  "Initialized",
  "Ready",
  "ContainersReady",
  "PodScheduled",
];

function conditionTypes(pod: V1Pod): string[] {
  return (pod.status?.conditions ?? []).map((c) => c.type).sort();
}

await onEachKubeServer("publisher suite", (kube) => {
  describe("start", () => {
    it("publishes follower before the caller campaigns, through one merge patch and one strategic status patch", async () => {
      h = await startHarness(kube);
      const result = await h.publisher.start(follower());
      expect(result).toEqual({ published: true, missingPermissions: [] });

      const pod = await h.pod();
      expect(role(pod)).toBe("follower");
      expect(pod.metadata?.annotations).toMatchObject({ "pglease.io/lease": "orders-sync" });
      expect(pod.metadata?.annotations?.["pglease.io/fence"]).toBeUndefined();
      expect(leaderCondition(pod)).toMatchObject({
        status: "False",
        reason: "LeaseNotHeld",
        message: "does not hold lease orders-sync",
      });
      expect(conditionTypes(pod)).toEqual([...KUBELET_CONDITIONS, "pglease.io/leader"].sort());

      // Each patch carries the pod's uid: a later pod of the same name refuses it.
      const uid = pod.metadata?.uid as string;
      expect(patchesOf(h.server)).toEqual([
        {
          target: POD,
          contentType: PatchStrategy.MergePatch,
          body: {
            metadata: {
              uid,
              labels: { "pglease.io/role": "follower" },
              annotations: { "pglease.io/lease": "orders-sync" },
            },
          },
        },
        {
          target: `${POD}/status`,
          contentType: PatchStrategy.StrategicMergePatch,
          body: {
            metadata: { uid },
            status: { conditions: [expect.objectContaining({ type: "pglease.io/leader", status: "False" })] },
          },
        },
      ]);
      expect(h.published).toEqual([{ role: "follower", fence: null, sinceChangeMs: expect.any(Number) }]);
      expect(h.publisher.state()).toEqual({ published: true });
    });

    it("resolves at its bound on its clock, reporting failure, when the API server never answers", async () => {
      const clock = new ManualClock();
      // A bound left to real time would outlast the test.
      h = await startHarness(kube, { clock, timing: { startTimeoutMs: 60_000 } });
      const held = h.server.faults.hang({ match: { method: "PATCH" } });
      const starting = h.publisher.start(follower());
      await held.waitForHeld(1);
      clock.advance(60_000);
      expect(await starting).toEqual({ published: false, missingPermissions: [] });
      expect(h.publisher.state().published).toBe(false);
      held.release();
      // The held PATCH may have been given up at its own timeout (a proxy then never forwards it):
      // the publisher's retry runs on the manual clock, so time moves while we wait.
      await until("the pod to show follower once the API server answers", async () => {
        clock.advance(1_000);
        return role(await h.pod()) === "follower";
      });
    });
  });

  describe("leadership on the pod", () => {
    it("keeps the kubelet's conditions, which a JSON merge patch on the status would have wiped", async () => {
      h = await startHarness(kube);
      await h.publisher.start(follower());
      h.publisher.setDesired(leader(42));
      await until("leader on the pod", () => h.publisher.state().published);

      const pod = await h.pod();
      expect(role(pod)).toBe("leader");
      expect(pod.metadata?.annotations).toMatchObject({
        "pglease.io/fence": "42",
        "pglease.io/holder": `${POD}-a1b2`,
        "pglease.io/lease": "orders-sync",
      });
      expect(leaderCondition(pod)).toMatchObject({
        status: "True",
        reason: "LeaseHeld",
        message: "holds lease orders-sync with fence 42",
      });
      expect(conditionTypes(pod)).toContain("Ready");
      expect(conditionTypes(pod)).toContain("ContainersReady");

      // The same condition sent as a JSON merge patch replaces the whole array on this server:
      // the assertion above could fail, and does for the wrong content type.
      await h.server.seedPod({ metadata: { name: "control", namespace: NAMESPACE } });
      const core = h.server.kubeConfig({ namespace: NAMESPACE }).makeApiClient(CoreV1Api);
      await core.patchNamespacedPodStatus(
        { name: "control", namespace: NAMESPACE, body: { status: { conditions: [leaderCondition(pod)] } } },
        setHeaderOptions("Content-Type", PatchStrategy.MergePatch),
      );
      expect(conditionTypes(await h.pod("control"))).toEqual(["pglease.io/leader"]);
    });

    it("patches only what differs from the pod as last seen", async () => {
      h = await startHarness(kube);
      await h.publisher.start(follower());
      h.publisher.setDesired(leader(42));
      await until("leader on the pod", () => h.publisher.state().published);
      h.server.clearRequests();
      const uid = (await h.pod()).metadata?.uid as string;

      h.publisher.setDesired(leader(42));
      h.publisher.setDesired(leader(43));
      await until("fence 43 on the pod", () => h.publisher.state().published);
      expect(patchesOf(h.server)).toEqual([
        {
          // A leader's labels are guarded: they apply only while no newer term fenced the pod off.
          target: POD,
          contentType: PatchStrategy.JsonPatch,
          body: [
            { op: "add", path: "/metadata/uid", value: uid },
            { op: "test", path: "/metadata/annotations/pglease.io~1superseded-by", value: null },
            { op: "add", path: "/metadata/annotations/pglease.io~1fence", value: "43" },
          ],
        },
        {
          target: `${POD}/status`,
          contentType: PatchStrategy.StrategicMergePatch,
          // Same status: no lastTransitionTime, so the server keeps the old one.
          body: {
            metadata: { uid },
            status: {
              conditions: [
                {
                  type: "pglease.io/leader",
                  status: "True",
                  reason: "LeaseHeld",
                  message: "holds lease orders-sync with fence 43",
                },
              ],
            },
          },
        },
      ]);

      h.server.clearRequests();
      h.publisher.setDesired(follower("orders-1-x"));
      await until("follower on the pod", () => h.publisher.state().published);
      // Its LeadershipLost event goes out once the pod shows the demotion: counted with that change.
      await until("the loss recorded", async () =>
        (await h.server.events(NAMESPACE)).some((e) => e.message?.endsWith("(fence 43)")),
      );
      h.server.clearRequests();
      h.publisher.setDesired(follower("orders-2-y"));
      await until("the new holder on the pod", () => h.publisher.state().published);
      expect(patchesOf(h.server)).toEqual([
        {
          target: POD,
          contentType: PatchStrategy.MergePatch,
          body: { metadata: { uid, annotations: { "pglease.io/holder": "orders-2-y" } } },
        },
      ]);
      expect(h.server.requests.filter((r) => r.method !== "GET")).toHaveLength(1);
    });

    it("moves lastTransitionTime only when the status flips", async () => {
      let clock = new Date("2025-03-01T10:00:00Z");
      h = await startHarness(kube, { wallClock: () => clock });
      await h.publisher.start(follower());
      const transition = async () => leaderCondition(await h.pod())?.lastTransitionTime?.toISOString();
      expect(await transition()).toBe("2025-03-01T10:00:00.000Z");

      clock = new Date("2025-03-01T10:05:00Z");
      h.publisher.setDesired(leader(7));
      await until("leader", () => h.publisher.state().published);
      expect(await transition()).toBe("2025-03-01T10:05:00.000Z");

      clock = new Date("2025-03-01T10:09:00Z");
      h.publisher.setDesired(leader(8));
      await until("fence 8", () => h.publisher.state().published);
      expect(leaderCondition(await h.pod())?.message).toBe("holds lease orders-sync with fence 8");
      expect(await transition()).toBe("2025-03-01T10:05:00.000Z");
    });

    it("reports each patch and the time a new role took to show, on its clock", async () => {
      const clock = new ManualClock();
      h = await startHarness(kube, { clock });
      await h.publisher.start(follower());
      const held = h.server.faults.hang({ match: { method: "PATCH" } });
      h.publisher.setDesired(leader(3));
      // Labels and condition go out together: both are in flight at once.
      await held.waitForHeld(2);
      clock.advance(120);
      held.release();
      // The real server may stream the watch event of the status write (which reports the role as
      // shown) before it answers the PATCH (which reports the patch): wait for both.
      await until(
        "leader shown and both patches reported",
        () => h.published.length === 2 && h.patches.length === 4,
      );
      expect(h.published[1]).toEqual({ role: "leader", fence: 3, sinceChangeMs: 120 });
      // Either answer may come back first.
      const reported = h.patches.map((p) => [p.target, p.ok, p.durationMs]);
      expect([...reported.slice(0, 2).sort(), ...reported.slice(2).sort()]).toEqual([
        ["metadata", true, 0],
        ["status", true, 0],
        ["metadata", true, 120],
        ["status", true, 120],
      ]);
    });
  });

  describe("demote", () => {
    it("sets follower and resolves once the pod shows it", async () => {
      h = await startHarness(kube);
      await h.publisher.start(follower());
      h.publisher.setDesired(leader(5));
      await until("leader", () => h.publisher.state().published);
      expect(await h.publisher.demote(2_000)).toBe(true);
      expect(role(await h.pod())).toBe("follower");
      expect(leaderCondition(await h.pod())?.status).toBe("False");
      expect((await h.pod()).metadata?.annotations?.["pglease.io/fence"]).toBeUndefined();
    });

    it("gives up at its bound on its clock when the API server hangs", async () => {
      const clock = new ManualClock();
      h = await startHarness(kube, { clock });
      await h.publisher.start(follower());
      h.publisher.setDesired(leader(5));
      await until("leader", () => h.publisher.state().published);
      const held = h.server.faults.hang({ match: { method: "PATCH" } });
      const demoted = h.publisher.demote(30_000);
      await held.waitForHeld(1);
      clock.advance(29_999);
      expect(await settled(demoted)).toBe(false);
      clock.advance(1);
      expect(await demoted).toBe(false);
      held.release();
    });

    it("ends a hold without waiting out its bound once every peer is being deleted: no new leader will come", async () => {
      // The clock stands still: a wait left to its timeout would never end.
      const clock = new ManualClock();
      h = await startHarness(kube, { clock });
      await h.server.seedPod({
        metadata: { name: "orders-1", namespace: NAMESPACE, labels: { ...APP_LABELS } },
      });
      await h.publisher.start(follower());
      h.publisher.setDesired(leader(42));
      await until("leader on the pod", () => h.publisher.state().published);
      h.publisher.holdOwnWrites();
      h.publisher.setDesired(follower());
      let ended: boolean | null = null;
      const ending = h.publisher.endHold(20_000).then((demoted) => {
        ended = demoted;
      });
      // helm uninstall: the peer's deletion comes moments after this pod's (its release done).
      await h.server.deletePod(NAMESPACE, "orders-1", 30);
      // The old code looked at the peers once, when the hold's wait began, then waited 10 s.
      await until("the hold ended with the clock standing still", () => ended !== null);
      await ending;
      expect(ended).toBe(true);
      expect(role(await h.pod())).toBe("follower");
    });
  });

  describe("events", () => {
    it("records a gain and a loss on the pod, with the fence", async () => {
      h = await startHarness(kube);
      await h.publisher.start(follower());
      h.publisher.setDesired(leader(42));
      await h.publisher.demote(2_000);
      await until("two events", async () => (await h.server.events(NAMESPACE)).length === 2);
      const uid = (await h.pod()).metadata?.uid;
      const events = (await h.server.events(NAMESPACE)).map((e) => ({
        reason: e.reason,
        type: e.type,
        message: e.message,
        involved: e.involvedObject,
      }));
      expect(events).toEqual(
        expect.arrayContaining([
          {
            reason: "LeaderElected",
            type: "Normal",
            message: `${POD} became leader of lease orders-sync with fence 42`,
            involved: expect.objectContaining({ kind: "Pod", name: POD, namespace: NAMESPACE, uid }),
          },
          {
            reason: "LeadershipLost",
            type: "Normal",
            message: `${POD} lost lease orders-sync (fence 42)`,
            involved: expect.objectContaining({ kind: "Pod", name: POD, uid }),
          },
        ]),
      );
    });

    it("sends a new leader's event once its pod shows the label: the handover's requests go first", async () => {
      h = await startHarness(kube);
      await h.publisher.start(follower());
      const from = h.server.requests.length;
      h.publisher.setDesired(leader(42));
      await until("leader", () => h.publisher.state().published);
      await until("the event", async () => (await h.server.events(NAMESPACE)).length === 1);
      const sent = h.server.requests.slice(from);
      const label = sent.find((r) => r.method === "PATCH" && !r.subresource && roleIn(r.body) === "leader");
      const event = sent.find((r) => r.method === "POST" && r.resource === "events");
      // Sent beside the pass, it took a connection (often a fresh TLS one) from the quorum list.
      // It goes out once the pod's own watch shows the label, which can be before the label's
      // answer reaches the recording proxy (on the real server): after the label was sent, not
      // necessarily after its answer was recorded.
      expect(label?.answeredAt).toBeGreaterThan(0);
      expect(event?.at).toBeGreaterThanOrEqual(label?.at ?? Number.POSITIVE_INFINITY);
      expect(sent.indexOf(event as (typeof sent)[number])).toBeGreaterThan(
        sent.indexOf(label as (typeof sent)[number]),
      );
    });

    it("sends a held pod's last event when it stops, not a request timeout later: its stopped watch shows nothing more", async () => {
      // The clock stands still: a wait left to its timeout would never end.
      const clock = new ManualClock();
      h = await startHarness(kube, { clock });
      // A peer not being deleted: a new leader may come and demote this pod (PodPublisher.endHold).
      await h.server.seedPod({
        metadata: { name: "orders-1", namespace: NAMESPACE, labels: { ...APP_LABELS } },
      });
      await h.publisher.start(follower());
      h.publisher.setDesired(leader(42));
      await until("leader on the pod", () => h.publisher.state().published);
      await until("the LeaderElected event", async () => (await h.server.events(NAMESPACE)).length === 1);
      // Its pod being deleted, it writes nothing to it: the new leader takes its label off, and the
      // condition in a request of its own (the SIGTERM came between the two, as in the sidecar).
      h.publisher.holdOwnWrites();
      h.publisher.setDesired(follower("orders-1-x"));
      const core = h.server.kubeConfig({ namespace: NAMESPACE }).makeApiClient(CoreV1Api);
      await core.patchNamespacedPod(
        {
          name: POD,
          namespace: NAMESPACE,
          body: { metadata: { labels: { "pglease.io/role": "follower" } } },
        },
        setHeaderOptions("Content-Type", PatchStrategy.MergePatch),
      );
      h.server.clearRequests();
      expect(await h.publisher.endHold(10_000)).toBe(true);
      let stopped = false;
      const stopping = h.publisher.stop().then(() => {
        stopped = true;
      });
      // The old code stopped the pod watch, then waited for the LeadershipLost event, which waited
      // for the pod to show the follower state: a request timeout (5 s) added to every such exit.
      await until("stopped with the clock standing still", () => stopped);
      await stopping;
      const reasons = (await h.server.events(NAMESPACE)).map((e) => e.reason);
      expect(reasons.sort()).toEqual(["LeaderElected", "LeadershipLost"]);
      // The hold ended without a write of its own: the new leader's demotion stood.
      expect(h.server.requests.filter((r) => r.method === "PATCH")).toEqual([]);
    });

    it("logs and drops an event that keeps failing, without holding up publishing", async () => {
      h = await startHarness(kube);
      await h.publisher.start(follower());
      h.server.faults.failNext({ match: { method: "POST", path: /\/events$/ }, status: 500, count: 100 });
      h.publisher.setDesired(leader(9));
      await until("leader", () => h.publisher.state().published);
      await until("the event given up on", () => h.logs.some((l) => l.msg.startsWith("event not recorded")));
      const posts = h.server.requests.filter((r) => r.method === "POST" && r.resource === "events");
      expect(posts).toHaveLength(3);
      expect(await h.server.events(NAMESPACE)).toHaveLength(0);
    });
  });
});
