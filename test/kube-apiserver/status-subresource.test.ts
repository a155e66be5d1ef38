import { CoreV1Api, PatchStrategy, setHeaderOptions } from "@kubernetes/client-node";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { failureOf } from "../support/kube/apiserver/client.ts";
import { type KubeApiServer, startKubeApiServer } from "../support/kube/apiserver/index.ts";

let server: KubeApiServer;
let api: CoreV1Api;
const merge = setHeaderOptions("Content-Type", PatchStrategy.MergePatch);
const strategic = setHeaderOptions("Content-Type", PatchStrategy.StrategicMergePatch);

beforeEach(async () => {
  server = await startKubeApiServer();
  api = server.kubeConfig().makeApiClient(CoreV1Api);
  server.seedPod({ metadata: { name: "p1", labels: { app: "db" } } });
});
afterEach(async () => {
  await server.close();
});

describe("status subresource isolation", () => {
  it("a patch on the pod ignores .status but applies metadata", async () => {
    const pod = await api.patchNamespacedPod(
      {
        name: "p1",
        namespace: "default",
        body: { metadata: { labels: { role: "leader" } }, status: { phase: "Failed", conditions: [] } },
      },
      merge,
    );
    expect(pod.metadata?.labels?.role).toBe("leader");
    expect(pod.status?.phase).toBe("Running");
    expect(server.pod("default", "p1")?.status?.conditions?.length).toBe(5);
  });

  it("a patch on pods/status ignores everything but .status", async () => {
    const pod = await api.patchNamespacedPodStatus(
      {
        name: "p1",
        namespace: "default",
        body: { metadata: { labels: { role: "leader" } }, status: { phase: "Succeeded" } },
      },
      strategic,
    );
    expect(pod.status?.phase).toBe("Succeeded");
    expect(pod.metadata?.labels).toEqual({ app: "db" });
  });

  it("a PUT on the pod keeps the stored status; a PUT on pods/status keeps the stored labels", async () => {
    const current = await api.readNamespacedPod({ name: "p1", namespace: "default" });
    current.metadata = { ...current.metadata, labels: { app: "web" } };
    current.status = { ...current.status, phase: "Failed" };
    const afterPut = await api.replaceNamespacedPod({ name: "p1", namespace: "default", body: current });
    expect(afterPut.metadata?.labels).toEqual({ app: "web" });
    expect(afterPut.status?.phase).toBe("Running");

    afterPut.metadata = { ...afterPut.metadata, labels: { app: "other" } };
    afterPut.status = { ...afterPut.status, phase: "Failed" };
    const afterStatusPut = await api.replaceNamespacedPodStatus({
      name: "p1",
      namespace: "default",
      body: afterPut,
    });
    expect(afterStatusPut.metadata?.labels).toEqual({ app: "web" });
    expect(afterStatusPut.status?.phase).toBe("Failed");
  });

  it("keeps whole seconds of a condition's lastTransitionTime, as metav1.Time does", async () => {
    const sent = new Date("2030-01-02T03:04:05.678Z");
    await api.patchNamespacedPodStatus(
      {
        name: "p1",
        namespace: "default",
        body: {
          status: { conditions: [{ type: "pglease.io/leader", status: "True", lastTransitionTime: sent }] },
        },
      },
      strategic,
    );
    const stored = server
      .pod("default", "p1")
      ?.status?.conditions?.find((c) => c.type === "pglease.io/leader");
    expect(stored?.lastTransitionTime?.toISOString()).toBe("2030-01-02T03:04:05.000Z");
  });
});

describe("resourceVersion", () => {
  it("bumps on every write and fills identity on create", async () => {
    const created = await api.createNamespacedPod({
      namespace: "default",
      body: {
        metadata: { name: "p2" },
        spec: { containers: [{ name: "c", image: "i" }] },
        status: { phase: "Running" },
      },
    });
    expect(created.metadata?.uid).toMatch(/^[0-9a-f-]{36}$/);
    expect(created.metadata?.generation).toBe(1);
    expect(created.metadata?.creationTimestamp).toBeInstanceOf(Date);
    expect(created.status?.phase).toBe("Pending");
    const rv = Number(created.metadata?.resourceVersion);
    const patched = await api.patchNamespacedPod(
      { name: "p2", namespace: "default", body: { metadata: { labels: { a: "b" } } } },
      merge,
    );
    expect(Number(patched.metadata?.resourceVersion)).toBeGreaterThan(rv);
  });

  it("answers 409 Conflict to a PUT with a stale resourceVersion", async () => {
    const stale = await api.readNamespacedPod({ name: "p1", namespace: "default" });
    server.mutatePod("default", "p1", (pod) => {
      pod.metadata = { ...pod.metadata, labels: { app: "changed" } };
    });
    const { code, status } = await failureOf(
      api.replaceNamespacedPod({ name: "p1", namespace: "default", body: stale }),
    );
    expect(code).toBe(409);
    expect(status).toMatchObject({ reason: "Conflict", details: { name: "p1", kind: "pods" } });
    expect(status.message).toBe(
      'Operation cannot be fulfilled on pods "p1": the object has been modified; please apply your changes to the latest version and try again',
    );
  });

  it("answers 409 to a merge patch carrying a stale metadata.resourceVersion, on the pod and on pods/status", async () => {
    const rv = server.pod("default", "p1")?.metadata?.resourceVersion;
    server.mutatePod("default", "p1", (pod) => {
      pod.metadata = { ...pod.metadata, annotations: { touched: "yes" } };
    });
    const body = { metadata: { resourceVersion: rv, labels: { x: "y" } }, status: { phase: "Failed" } };
    expect(
      (await failureOf(api.patchNamespacedPod({ name: "p1", namespace: "default", body }, merge))).code,
    ).toBe(409);
    expect(
      (await failureOf(api.patchNamespacedPodStatus({ name: "p1", namespace: "default", body }, merge))).code,
    ).toBe(409);
    const current = server.pod("default", "p1")?.metadata?.resourceVersion;
    const ok = await api.patchNamespacedPod(
      {
        name: "p1",
        namespace: "default",
        body: { metadata: { resourceVersion: current, labels: { x: "y" } } },
      },
      merge,
    );
    expect(ok.metadata?.labels?.x).toBe("y");
  });

  it("answers 404 NotFound for a missing pod and 409 AlreadyExists for a duplicate create", async () => {
    const missing = await failureOf(api.readNamespacedPod({ name: "nope", namespace: "default" }));
    expect(missing).toMatchObject({
      code: 404,
      status: { reason: "NotFound", message: 'pods "nope" not found' },
    });
    const duplicate = await failureOf(
      api.createNamespacedPod({
        namespace: "default",
        body: { metadata: { name: "p1" }, spec: { containers: [{ name: "c", image: "i" }] } },
      }),
    );
    expect(duplicate).toMatchObject({ code: 409, status: { reason: "AlreadyExists" } });
  });

  it("rejects spec changes other than the container image (422) and bumps generation for an image change", async () => {
    const forbidden = await failureOf(
      api.patchNamespacedPod(
        { name: "p1", namespace: "default", body: { spec: { restartPolicy: "Never" } } },
        merge,
      ),
    );
    expect(forbidden).toMatchObject({ code: 422, status: { reason: "Invalid" } });
    expect(forbidden.status.message).toContain("pod updates may not change fields other than");
    const patched = await api.patchNamespacedPod(
      { name: "p1", namespace: "default", body: { spec: { containers: [{ name: "app", image: "app:2" }] } } },
      strategic,
    );
    expect(patched.spec?.containers[0]?.image).toBe("app:2");
    expect(patched.metadata?.generation).toBe(2);
  });

  it("refuses dryRun rather than persisting a write meant only as a try", async () => {
    const failure = await failureOf(
      api.patchNamespacedPod(
        { name: "p1", namespace: "default", body: { metadata: { labels: { x: "y" } } }, dryRun: "All" },
        merge,
      ),
    );
    expect(failure).toMatchObject({
      code: 400,
      status: { message: "dryRun is not modelled by the test API server" },
    });
    expect(server.pod("default", "p1")?.metadata?.labels?.x).toBeUndefined();
  });

  it("deletes a pod", async () => {
    await api.deleteNamespacedPod({ name: "p1", namespace: "default" });
    expect(server.pod("default", "p1")).toBeUndefined();
  });
});
