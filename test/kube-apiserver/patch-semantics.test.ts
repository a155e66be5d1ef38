import { CoreV1Api, PatchStrategy, setHeaderOptions, type V1Pod } from "@kubernetes/client-node";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { failureOf } from "../support/kube/apiserver/client.ts";
import { type KubeApiServer, startKubeApiServer } from "../support/kube/apiserver/index.ts";

let server: KubeApiServer;
let api: CoreV1Api;

beforeEach(async () => {
  server = await startKubeApiServer();
  api = server.kubeConfig().makeApiClient(CoreV1Api);
  server.seedPod({ metadata: { name: "p1", labels: { app: "db" } } });
});
afterEach(async () => {
  await server.close();
});

const as = (strategy: PatchStrategy) => setHeaderOptions("Content-Type", strategy);
const conditionTypes = (pod: V1Pod | undefined) => pod?.status?.conditions?.map((c) => c.type) ?? [];
const leaderCondition = { type: "pglease.io/leader", status: "True", reason: "Acquired" };

describe("JSON merge patch", () => {
  it("adds, changes and deletes (null) labels in one request", async () => {
    const body = { metadata: { labels: { "pglease.io/role": "leader", app: null } } };
    const pod = await api.patchNamespacedPod(
      { name: "p1", namespace: "default", body },
      as(PatchStrategy.MergePatch),
    );
    expect(pod.metadata?.labels).toEqual({ "pglease.io/role": "leader" });
    expect(server.requests.at(-1)?.contentType).toBe("application/merge-patch+json");
  });

  it("on status.conditions replaces the whole list, wiping the kubelet's conditions", async () => {
    expect(conditionTypes(server.pod("default", "p1"))).toContain("Ready");
    await api.patchNamespacedPodStatus(
      { name: "p1", namespace: "default", body: { status: { conditions: [leaderCondition] } } },
      as(PatchStrategy.MergePatch),
    );
    expect(conditionTypes(server.pod("default", "p1"))).toEqual(["pglease.io/leader"]);
  });
});

describe("strategic merge patch", () => {
  it("merges status.conditions by type, keeping the kubelet's", async () => {
    const before = conditionTypes(server.pod("default", "p1"));
    await api.patchNamespacedPodStatus(
      { name: "p1", namespace: "default", body: { status: { conditions: [leaderCondition] } } },
      as(PatchStrategy.StrategicMergePatch),
    );
    expect(conditionTypes(server.pod("default", "p1"))).toEqual([...before, "pglease.io/leader"]);

    await api.patchNamespacedPodStatus(
      {
        name: "p1",
        namespace: "default",
        body: { status: { conditions: [{ ...leaderCondition, status: "False" }] } },
      },
      as(PatchStrategy.StrategicMergePatch),
    );
    const conditions = server.pod("default", "p1")?.status?.conditions ?? [];
    expect(conditions.map((c) => c.type)).toEqual([...before, "pglease.io/leader"]);
    expect(conditions.find((c) => c.type === "pglease.io/leader")?.status).toBe("False");
    expect(conditions.find((c) => c.type === "pglease.io/leader")?.reason).toBe("Acquired");
  });

  it("removes one condition with $patch: delete and leaves the others", async () => {
    const before = conditionTypes(server.pod("default", "p1"));
    await api.patchNamespacedPodStatus(
      {
        name: "p1",
        namespace: "default",
        body: { status: { conditions: [{ type: "Ready", $patch: "delete" }] } },
      },
      as(PatchStrategy.StrategicMergePatch),
    );
    expect(conditionTypes(server.pod("default", "p1"))).toEqual(before.filter((t) => t !== "Ready"));
  });

  it("merges containers by name and ownerReferences by uid", async () => {
    server.mutatePod("default", "p1", (pod) => {
      pod.spec = {
        containers: [
          { name: "app", image: "app:1" },
          { name: "side", image: "side:1" },
        ],
      };
      pod.metadata = {
        ...pod.metadata,
        ownerReferences: [{ apiVersion: "v1", kind: "X", name: "a", uid: "u1" }],
      };
    });
    await api.patchNamespacedPod(
      {
        name: "p1",
        namespace: "default",
        body: {
          spec: { containers: [{ name: "side", image: "side:2" }] },
          metadata: { ownerReferences: [{ apiVersion: "v1", kind: "X", name: "b", uid: "u2" }] },
        },
      },
      as(PatchStrategy.StrategicMergePatch),
    );
    const pod = server.pod("default", "p1");
    expect(pod?.spec?.containers.map((c) => `${c.name}=${c.image}`)).toEqual(["app=app:1", "side=side:2"]);
    expect(pod?.metadata?.ownerReferences?.map((o) => o.uid)).toEqual(["u1", "u2"]);
  });
});

describe("JSON patch", () => {
  it("applies add, replace, remove and test, with ~1 escaping for a '/' in a key", async () => {
    await api.patchNamespacedPod(
      {
        name: "p1",
        namespace: "default",
        body: [
          { op: "test", path: "/metadata/labels/app", value: "db" },
          { op: "add", path: "/metadata/labels/pglease.io~1role", value: "follower" },
          { op: "replace", path: "/metadata/labels/pglease.io~1role", value: "leader" },
          { op: "remove", path: "/metadata/labels/app" },
        ],
      },
      as(PatchStrategy.JsonPatch),
    );
    expect(server.pod("default", "p1")?.metadata?.labels).toEqual({ "pglease.io/role": "leader" });
  });

  it("is the client's default content type", async () => {
    await api.patchNamespacedPod({
      name: "p1",
      namespace: "default",
      body: [{ op: "add", path: "/metadata/annotations", value: { a: "b" } }],
    });
    expect(server.requests.at(-1)?.contentType).toBe("application/json-patch+json");
    expect(server.pod("default", "p1")?.metadata?.annotations).toEqual({ a: "b" });
  });

  it("fails the whole patch with 422 when a test op fails, changing nothing", async () => {
    const rv = server.pod("default", "p1")?.metadata?.resourceVersion;
    const call = api.patchNamespacedPod(
      {
        name: "p1",
        namespace: "default",
        body: [
          { op: "add", path: "/metadata/labels/x", value: "y" },
          { op: "test", path: "/metadata/labels/app", value: "web" },
        ],
      },
      as(PatchStrategy.JsonPatch),
    );
    await expect(call).rejects.toMatchObject({ code: 422, body: expect.stringContaining("test failed") });
    expect(server.pod("default", "p1")?.metadata?.resourceVersion).toBe(rv);
    expect(server.pod("default", "p1")?.metadata?.labels).toEqual({ app: "db" });
  });
});

describe("content types", () => {
  it("answers 415 with a Status for an unknown content type", async () => {
    const call = api.patchNamespacedPod(
      { name: "p1", namespace: "default", body: { metadata: { labels: { a: "b" } } } },
      setHeaderOptions("Content-Type", "application/json"),
    );
    const { code, status } = await failureOf(call);
    expect(code).toBe(415);
    expect(status).toMatchObject({
      kind: "Status",
      status: "Failure",
      reason: "UnsupportedMediaType",
      code: 415,
    });
    expect(status.message).toContain("application/strategic-merge-patch+json");
  });

  it("answers 415 to server-side apply, saying it is not modelled", async () => {
    const call = api.patchNamespacedPod(
      { name: "p1", namespace: "default", body: { metadata: { labels: { a: "b" } } } },
      as(PatchStrategy.ServerSideApply),
    );
    await expect(call).rejects.toMatchObject({
      code: 415,
      body: expect.stringContaining("server-side apply"),
    });
  });

  it("does not bump resourceVersion for a patch that changes nothing", async () => {
    const rv = server.pod("default", "p1")?.metadata?.resourceVersion;
    const pod = await api.patchNamespacedPod(
      { name: "p1", namespace: "default", body: { metadata: { labels: { app: "db" } } } },
      as(PatchStrategy.MergePatch),
    );
    expect(pod.metadata?.resourceVersion).toBe(rv);
  });
});

describe("request log", () => {
  it("records what RBAC sees, the content type, the parsed body and the status of each request", async () => {
    server.clearRequests();
    const body = { status: { conditions: [leaderCondition] } };
    await api.patchNamespacedPodStatus(
      { name: "p1", namespace: "default", body },
      as(PatchStrategy.StrategicMergePatch),
    );
    await api.readNamespacedPod({ name: "p2", namespace: "default" }).catch(() => undefined);
    expect(server.requests).toMatchObject([
      {
        method: "PATCH",
        path: "/api/v1/namespaces/default/pods/p1/status",
        verb: "patch",
        resource: "pods",
        subresource: "status",
        namespace: "default",
        name: "p1",
        contentType: "application/strategic-merge-patch+json",
        body,
        status: 200,
      },
      { method: "GET", verb: "get", name: "p2", status: 404 },
    ]);
  });
});
