import { CoreV1Api, PatchStrategy, setHeaderOptions, type V1Role } from "@kubernetes/client-node";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { failureOf } from "../support/kube/apiserver/client.ts";
import { type KubeApiServer, startKubeApiServer } from "../support/kube/apiserver/index.ts";

let server: KubeApiServer;
let api: CoreV1Api;

/** The Role DESIGN.md §3 asks for: pods get/list/watch/patch, pods/status patch, events create. */
const minimalRole: V1Role = {
  metadata: { name: "pglease", namespace: "ns" },
  rules: [
    { apiGroups: [""], resources: ["pods"], verbs: ["get", "list", "watch", "patch"] },
    { apiGroups: [""], resources: ["pods/status"], verbs: ["patch"] },
    { apiGroups: ["", "events.k8s.io"], resources: ["events"], verbs: ["create"] },
  ],
};

beforeEach(async () => {
  server = await startKubeApiServer({ user: "system:serviceaccount:ns:sa" });
  api = server.kubeConfig({ namespace: "ns" }).makeApiClient(CoreV1Api);
  server.seedPod({ metadata: { name: "a", namespace: "ns", labels: { app: "db", tier: "1" } } });
  server.seedPod({ metadata: { name: "b", namespace: "ns", labels: { app: "web" } } });
  server.seedPod({ metadata: { name: "c", namespace: "ns", labels: { app: "cache", tier: "2" } } });
  server.seedPod({ metadata: { name: "d", namespace: "other", labels: { app: "db" } } });
});
afterEach(async () => {
  await server.close();
});

describe("list with a label selector", () => {
  const names = async (labelSelector: string) =>
    (await api.listNamespacedPod({ namespace: "ns", labelSelector })).items.map((p) => p.metadata?.name);

  it.each([
    ["app=db", ["a"]],
    ["app==db", ["a"]],
    ["app!=db", ["b", "c"]],
    ["tier", ["a", "c"]],
    ["!tier", ["b"]],
    ["app in (db,web)", ["a", "b"]],
    ["app notin (db,web)", ["c"]],
    ["app in (db, cache),tier", ["a", "c"]],
    ["tier>1", ["c"]],
    ["", ["a", "b", "c"]],
  ])("%s selects %j", async (selector, expected) => {
    expect(await names(selector)).toEqual(expected);
  });

  it("answers 400 to a selector that does not parse", async () => {
    const failure = await failureOf(api.listNamespacedPod({ namespace: "ns", labelSelector: "app in db" }));
    expect(failure).toMatchObject({ code: 400, status: { reason: "BadRequest" } });
  });

  it("lists across namespaces at the cluster scope", async () => {
    const all = await api.listPodForAllNamespaces({ labelSelector: "app=db" });
    expect(all.items.map((p) => `${p.metadata?.namespace}/${p.metadata?.name}`)).toEqual(["ns/a", "other/d"]);
  });

  it("carries the list's resourceVersion and filters on fields too", async () => {
    const list = await api.listNamespacedPod({ namespace: "ns", fieldSelector: "metadata.name!=a" });
    expect(list.metadata?.resourceVersion).toBe(String(server.resourceVersion));
    expect(list.items.map((p) => p.metadata?.name)).toEqual(["b", "c"]);
  });
});

describe("RBAC with a Role", () => {
  beforeEach(() => {
    server.setRole(minimalRole);
  });

  it("lets the Role's verbs through", async () => {
    await expect(api.readNamespacedPod({ name: "a", namespace: "ns" })).resolves.toBeDefined();
    await expect(api.listNamespacedPod({ namespace: "ns" })).resolves.toBeDefined();
    await api.patchNamespacedPodStatus(
      {
        name: "a",
        namespace: "ns",
        body: { status: { conditions: [{ type: "pglease.io/leader", status: "True" }] } },
      },
      setHeaderOptions("Content-Type", PatchStrategy.StrategicMergePatch),
    );
    await api.createNamespacedEvent({
      namespace: "ns",
      body: { metadata: { name: "e1" }, involvedObject: { name: "a" }, reason: "R", message: "m" },
    });
    expect(server.requests.map((r) => r.status)).toEqual([200, 200, 200, 201]);
  });

  it("answers 403 with the real message for a verb outside the Role", async () => {
    server.setRole({
      metadata: { namespace: "ns" },
      rules: [{ apiGroups: [""], resources: ["pods"], verbs: ["get", "patch"] }],
    });
    const failure = await failureOf(
      api.patchNamespacedPodStatus(
        { name: "p1", namespace: "ns", body: { status: {} } },
        setHeaderOptions("Content-Type", PatchStrategy.StrategicMergePatch),
      ),
    );
    expect(failure.code).toBe(403);
    expect(failure.status).toMatchObject({ reason: "Forbidden", details: { name: "p1", kind: "pods" } });
    expect(failure.status.message).toBe(
      'pods "p1" is forbidden: User "system:serviceaccount:ns:sa" cannot patch resource "pods/status" in API group "" in the namespace "ns"',
    );
  });

  it("denies verbs the Role does not list: delete, update, create of pods, and other namespaces", async () => {
    const deny = async (call: Promise<unknown>) => (await failureOf(call)).status.message;
    expect(await deny(api.deleteNamespacedPod({ name: "a", namespace: "ns" }))).toContain(
      "cannot delete resource",
    );
    const pod = server.pod("ns", "a");
    if (!pod) throw new Error("seeded pod missing");
    expect(await deny(api.replaceNamespacedPod({ name: "a", namespace: "ns", body: pod }))).toContain(
      "cannot update resource",
    );
    expect(
      await deny(
        api.createNamespacedPod({
          namespace: "ns",
          body: { metadata: { name: "x" }, spec: { containers: [{ name: "c", image: "i" }] } },
        }),
      ),
    ).toBe(
      'pods is forbidden: User "system:serviceaccount:ns:sa" cannot create resource "pods" in API group "" in the namespace "ns"',
    );
    expect(await deny(api.readNamespacedPod({ name: "d", namespace: "other" }))).toContain(
      'in the namespace "other"',
    );
    expect(await deny(api.listPodForAllNamespaces())).toContain("at the cluster scope");
    expect(server.pod("ns", "a")).toBeDefined();
  });

  it("checks watch separately from list", async () => {
    server.setRole({
      metadata: { namespace: "ns" },
      rules: [{ apiGroups: [""], resources: ["pods"], verbs: ["list"] }],
    });
    const response = await fetch(`${server.url}/api/v1/namespaces/ns/pods?watch=true`, {
      headers: { Authorization: `Bearer ${server.kubeConfig().getCurrentUser()?.token}` },
    });
    expect(response.status).toBe(403);
    expect(((await response.json()) as { message: string }).message).toContain("cannot watch resource");
  });

  it("honours resourceNames, also for a list pinned by metadata.name", async () => {
    server.setRole({
      metadata: { namespace: "ns" },
      rules: [{ apiGroups: [""], resources: ["pods"], verbs: ["get", "list"], resourceNames: ["a"] }],
    });
    await expect(api.readNamespacedPod({ name: "a", namespace: "ns" })).resolves.toBeDefined();
    expect((await failureOf(api.readNamespacedPod({ name: "b", namespace: "ns" }))).code).toBe(403);
    await expect(
      api.listNamespacedPod({ namespace: "ns", fieldSelector: "metadata.name=a" }),
    ).resolves.toBeDefined();
    expect((await failureOf(api.listNamespacedPod({ namespace: "ns" }))).code).toBe(403);
  });

  it("is off again with setRole(null), and a malformed Role fails at once naming the field", async () => {
    server.setRole(null);
    await expect(api.deleteNamespacedPod({ name: "b", namespace: "ns" })).resolves.toBeDefined();
    expect(() => server.setRole({ rules: [{ verbs: "get" }] })).toThrow(
      "role.rules[0].verbs must be a list of strings",
    );
  });

  it("answers 401 to a request without the bearer token", async () => {
    const response = await fetch(`${server.url}/api/v1/namespaces/ns/pods`);
    expect(response.status).toBe(401);
  });
});
