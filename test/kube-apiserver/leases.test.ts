import { CoordinationV1Api, type V1Lease, V1MicroTime } from "@kubernetes/client-node";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { failureOf } from "../support/kube/apiserver/client.ts";
import { type KubeApiServer, startKubeApiServer } from "../support/kube/apiserver/index.ts";

let server: KubeApiServer;
let api: CoordinationV1Api;

/** What client-go's leader election needs on its Lease, and nothing more. */
const electionRole = {
  metadata: { namespace: "ns" },
  rules: [{ apiGroups: ["coordination.k8s.io"], resources: ["leases"], verbs: ["get", "create", "update"] }],
};

const lease = (holder: string): V1Lease => ({
  metadata: { name: "elect", namespace: "ns" },
  spec: {
    holderIdentity: holder,
    leaseDurationSeconds: 15,
    acquireTime: new V1MicroTime("2026-11-30T10:00:00.123Z"),
    renewTime: new V1MicroTime("2026-11-30T10:00:00.123Z"),
    leaseTransitions: 0,
  },
});

beforeEach(async () => {
  server = await startKubeApiServer({ role: electionRole, user: "system:serviceaccount:ns:sa" });
  api = server.kubeConfig({ namespace: "ns" }).makeApiClient(CoordinationV1Api);
});
afterEach(async () => {
  await server.close();
});

describe("coordination.k8s.io/v1 leases", () => {
  it("creates, reads back with microsecond times, and refuses a second create", async () => {
    const created = await api.createNamespacedLease({ namespace: "ns", body: lease("a") });
    expect(created.metadata?.resourceVersion).toMatch(/^\d+$/);
    const read = await api.readNamespacedLease({ name: "elect", namespace: "ns" });
    expect(read.spec?.holderIdentity).toBe("a");
    expect(String(read.spec?.renewTime)).toBe("2026-11-30T10:00:00.123000Z");
    const again = await failureOf(api.createNamespacedLease({ namespace: "ns", body: lease("b") }));
    expect(again).toMatchObject({ code: 409, status: { reason: "AlreadyExists" } });
  });

  it("answers 404 for a lease nobody created, on read and on update", async () => {
    const read = await failureOf(api.readNamespacedLease({ name: "elect", namespace: "ns" }));
    expect(read).toMatchObject({ code: 404, status: { reason: "NotFound" } });
    const body = { ...lease("a"), metadata: { name: "elect", resourceVersion: "1" } };
    const update = await failureOf(api.replaceNamespacedLease({ name: "elect", namespace: "ns", body }));
    expect(update.code).toBe(404);
  });

  it("updates at the current resourceVersion; of two writers that read the same version, the second gets 409", async () => {
    await api.createNamespacedLease({ namespace: "ns", body: lease("old") });
    const seenByA = await api.readNamespacedLease({ name: "elect", namespace: "ns" });
    const seenByB = await api.readNamespacedLease({ name: "elect", namespace: "ns" });
    const claim = (seen: V1Lease, holder: string) =>
      api.replaceNamespacedLease({
        name: "elect",
        namespace: "ns",
        body: { ...seen, spec: { ...seen.spec, holderIdentity: holder, leaseTransitions: 1 } },
      });
    const won = await claim(seenByA, "a");
    expect(won.spec?.holderIdentity).toBe("a");
    expect(Number(won.metadata?.resourceVersion)).toBeGreaterThan(Number(seenByA.metadata?.resourceVersion));
    const lost = await failureOf(claim(seenByB, "b"));
    expect(lost).toMatchObject({ code: 409, status: { reason: "Conflict" } });
    expect(lost.status.message).toContain('leases.coordination.k8s.io "elect"');
    expect((await api.readNamespacedLease({ name: "elect", namespace: "ns" })).spec?.holderIdentity).toBe(
      "a",
    );
  });

  it("requires a resourceVersion on update and validates the spec", async () => {
    await api.createNamespacedLease({ namespace: "ns", body: lease("a") });
    const blind = await failureOf(
      api.replaceNamespacedLease({ name: "elect", namespace: "ns", body: lease("b") }),
    );
    expect(blind).toMatchObject({ code: 422, status: { reason: "Invalid" } });
    const bad = { ...lease("c"), spec: { ...lease("c").spec, leaseDurationSeconds: 0 } };
    const invalid = await failureOf(
      api.createNamespacedLease({ namespace: "ns", body: { ...bad, metadata: { name: "x" } } }),
    );
    expect(invalid.status.message).toContain("spec.leaseDurationSeconds");
  });

  it("enforces the Role and logs each request with its verb and group", async () => {
    server.setRole({
      metadata: { namespace: "ns" },
      rules: [{ apiGroups: ["coordination.k8s.io"], resources: ["leases"], verbs: ["get"] }],
    });
    const denied = await failureOf(api.createNamespacedLease({ namespace: "ns", body: lease("a") }));
    expect(denied.code).toBe(403);
    expect(denied.status.message).toContain(
      'cannot create resource "leases" in API group "coordination.k8s.io"',
    );
    expect(server.requests.map((r) => [r.verb, r.group, r.resource, r.status])).toEqual([
      ["create", "coordination.k8s.io", "leases", 403],
    ]);
  });
});
