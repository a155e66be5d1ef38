// A pod deleted and created again under its name (a force-deleted StatefulSet pod's next
// incarnation) is another pod: the publisher writes to the uid it pinned (POD_UID, else the pod as
// first read) and to no other, and a new leader's demotion of a peer reaches only the peer it saw.
// The end-to-end case, two sidecars, is test/sidecar/force-deleted-incarnation.test.ts.
import type { V1Pod } from "@kubernetes/client-node";
import { afterEach, describe, expect, it } from "vitest";
import type { Pod } from "../../src/kube/client/api-types.ts";
import { createKubeClient } from "../../src/kube/client/connection.ts";
import { kubeconfigTextConnection } from "../../src/kube/client/kubeconfig.ts";
import { demoteStalePeers } from "../../src/kube/peer-demotion.ts";
import { createPodApi, KubeRequestError } from "../../src/kube/pod-api.ts";
import { validatePublishConfig } from "../../src/kube/publish-config.ts";
import { monotonicClock } from "../../src/shared/clock.ts";
import { onEachKubeServer } from "../support/kube/kube-server-suites.ts";
import {
  APP_LABELS,
  follower,
  type Harness,
  leader,
  NAMESPACE,
  POD,
  role,
  startHarness,
  until,
} from "./publisher-harness.ts";

let h: Harness;
afterEach(async () => {
  await h?.close();
});

/** Force-deletes the harness's pod and creates the next one of its name; returns the new uid. */
async function nextIncarnation(labels: Record<string, string> = APP_LABELS): Promise<string> {
  const first = (await h.pod()).metadata?.uid;
  await h.server.deletePod(NAMESPACE, POD, 0);
  const next = await h.server.seedPod({ metadata: { name: POD, namespace: NAMESPACE, labels } });
  expect(next.metadata?.uid).not.toBe(first);
  return next.metadata?.uid as string;
}

/** PATCHes of the pod the server took since `from` (an index into its requests). */
const acceptedPatches = (from: number) =>
  h.server.requests.slice(from).filter((r) => r.method === "PATCH" && r.name === POD && r.status === 200);

await onEachKubeServer("publisher incarnation suite", (kube) => {
  describe("its own pod", () => {
    it("takes its pod's deletion (its watch's DELETED) as the end: nothing for the next pod of its name, and a demotion does not wait", async () => {
      h = await startHarness(kube);
      await h.publisher.start(follower());
      h.publisher.setDesired(leader(3));
      await until("the pod labelled leader", async () => role(await h.pod()) === "leader");

      await nextIncarnation();
      await until("the publisher to see its pod deleted", () =>
        /\(uid [^)]+\) was deleted/.test(h.publisher.state().lastError ?? ""),
      );
      const from = h.server.requests.length;
      h.publisher.setDesired(leader(4)); // a later term of this process: still nothing for that pod
      const started = Date.now();
      expect(await h.publisher.demote(5_000)).toBe(false);
      expect(Date.now() - started).toBeLessThan(1_000);
      expect(acceptedPatches(from)).toEqual([]);
      expect(role(await h.pod())).toBeUndefined();
      expect(h.logs.filter((l) => /publishes nothing more/.test(l.msg)).length).toBe(1);
    });

    it("pins each patch to its uid: one that reaches the next pod of its name is refused (422 metadata.uid), and it stops there", async () => {
      h = await startHarness(kube);
      await h.publisher.start(follower());
      h.publisher.setDesired(leader(3));
      await until("the pod labelled leader", async () => role(await h.pod()) === "leader");
      // Its own pod's watch refused from now on: it does not learn of the deletion before it patches.
      h.server.faults.failNext({
        match: (r) => r.watch && r.query.get("fieldSelector") !== null,
        status: 500,
        count: 1_000,
      });
      h.server.faults.dropWatches();
      await until("a refused watch of its pod", () =>
        h.server.requests.some((r) => r.verb === "watch" && r.query.fieldSelector && r.status === 500),
      );

      await nextIncarnation();
      const from = h.server.requests.length;
      h.publisher.setDesired(leader(4)); // the fence annotation and condition message change
      await until("the publisher to see its pod replaced", () =>
        /is another pod now/.test(h.publisher.state().lastError ?? ""),
      );
      // Its pod and status patches go out together and either refusal ends it: the other's answer
      // may still be on its way (the real server's proxy records a status when the answer arrives).
      const answered = () =>
        h.server.requests.slice(from).filter((r) => r.method === "PATCH" && r.name === POD && r.status !== 0);
      await until("both patches answered", () => answered().length >= 2);
      const patches = h.server.requests.slice(from).filter((r) => r.method === "PATCH" && r.name === POD);
      expect(patches.map((r) => [r.subresource ?? "pod", r.status]).sort()).toEqual([
        ["pod", 422],
        ["status", 422],
      ]);
      const next = await h.pod();
      expect([role(next), next.metadata?.annotations?.["pglease.io/fence"]]).toEqual([undefined, undefined]);
    });

    it("with POD_UID (podUid) set, never writes to a pod of its name with another uid, from the first read on", async () => {
      h = await startHarness(kube);
      await nextIncarnation();
      const from = h.server.requests.length;
      const other = h.another({ podUid: "00000000-0000-4000-8000-000000000000" });
      const started = await other.start(follower());
      expect(started.published).toBe(false);
      expect(other.state().lastError).toMatch(/is another pod now/);
      expect(acceptedPatches(from)).toEqual([]);
      expect(role(await h.pod())).toBeUndefined();
    });
  });

  describe("peer demotion", () => {
    it("reaches only the peer it saw: a peer replaced meanwhile by a pod of its name (leading a newer term) keeps its label", async () => {
      h = await startHarness(kube);
      const leaderPod = (name: string, fence: number): V1Pod => ({
        metadata: {
          name,
          namespace: NAMESPACE,
          labels: { ...APP_LABELS, "pglease.io/role": "leader" },
          annotations: { "pglease.io/lease": "orders-sync", "pglease.io/fence": String(fence) },
        },
      });
      const seen = await h.server.seedPod(leaderPod("orders-1", 7)); // as the new leader listed it
      await h.server.deletePod(NAMESPACE, "orders-1", 0);
      const next = await h.server.seedPod(leaderPod("orders-1", 9));

      const connection = await kubeconfigTextConnection(
        h.server.kubeConfig({ namespace: NAMESPACE }).exportConfig(),
      );
      const client = createKubeClient(connection);
      const validated = validatePublishConfig({ namespace: NAMESPACE, podName: POD });
      if ("problems" in validated) throw new Error(validated.problems.join("; "));
      try {
        const result = await demoteStalePeers({
          api: createPodApi({
            client,
            namespace: NAMESPACE,
            podName: POD,
            requestTimeoutMs: 5_000,
            clock: monotonicClock,
            stopSignal: new AbortController().signal,
          }),
          config: validated.config,
          peers: [seen as unknown as Pod],
          lease: "orders-sync",
          fence: 8,
          term: 8,
          fenceOffAll: false,
          wallClock: () => new Date(),
          stillLeads: () => true,
          observe: (run) => run(),
          demotedPod: () => {},
        });
        expect(result).toEqual({ demoted: [], stoppedEarly: false });
      } finally {
        client.close();
      }
      const after = await h.pod("orders-1");
      expect(after.metadata?.uid).toBe(next.metadata?.uid);
      expect([role(after), after.metadata?.annotations?.["pglease.io/fence"]]).toEqual(["leader", "9"]);
    });

    it("classifies the refusal of a patch pinned to another uid as another-pod", async () => {
      h = await startHarness(kube);
      const connection = await kubeconfigTextConnection(
        h.server.kubeConfig({ namespace: NAMESPACE }).exportConfig(),
      );
      const client = createKubeClient(connection);
      const api = createPodApi({
        client,
        namespace: NAMESPACE,
        podName: POD,
        requestTimeoutMs: 5_000,
        clock: monotonicClock,
        stopSignal: new AbortController().signal,
      });
      try {
        const target = { name: POD, uid: "00000000-0000-4000-8000-000000000000" };
        const refused = await api
          .patchMetadata(target, { metadata: { labels: { "pglease.io/role": "leader" } } })
          .catch((error: unknown) => error);
        expect(refused).toBeInstanceOf(KubeRequestError);
        expect([(refused as KubeRequestError).kind, (refused as KubeRequestError).status]).toEqual([
          "another-pod",
          422,
        ]);
      } finally {
        client.close();
      }
    });
  });
});
