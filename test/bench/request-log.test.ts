// The bench reads a handover's Kubernetes steps from the API server's request log: the new
// leader's self-label and the stopping leader's demotion. Since the late self-label was closed
// (src/kube/guarded-patch.ts) both are JSON patches (RFC 6902), not merge patches: a reader that
// knew only merge patches never saw the new leader labelled, and every pglease failover trial
// timed out ("the new leader's pod was never labelled").
import { describe, expect, it } from "vitest";
import { podLabelled, podLabelledLeader } from "../../bench/peers/request-log.ts";
import type { Pod } from "../../src/kube/client/api-types.ts";
import { guardedPatch } from "../../src/kube/guarded-patch.ts";
import type { RecordedRequest } from "../support/kube/apiserver/index.ts";

const ROLE = "pglease.io/role";
const SUPERSEDED = "pglease.io/superseded-by";
const UID = "4f1c2b7e-0000-4000-8000-000000000001";

function patchOf(name: string, body: unknown, status = 200): RecordedRequest {
  return {
    method: "PATCH",
    path: `/api/v1/namespaces/bench/pods/${name}`,
    query: {},
    contentType: "application/json-patch+json",
    status,
    at: 1,
    body,
    verb: "patch",
    resource: "pods",
    namespace: "bench",
    name,
  };
}

/** As src/kube/pod-api.ts sends a guarded patch: the uid pin first. */
const pinned = (ops: unknown[]) => [{ op: "add", path: "/metadata/uid", value: UID }, ...ops];

function pod(labels?: Record<string, string>, annotations?: Record<string, string>): Pod {
  return {
    metadata: {
      name: "p-1",
      uid: UID,
      ...(labels ? { labels } : {}),
      ...(annotations ? { annotations } : {}),
    },
  };
}

describe("bench request log", () => {
  it("sees a leader's guarded self-label (a JSON patch) as the pod labelled leader", () => {
    const seen = pod({ app: "bench", [ROLE]: "follower" }, { [SUPERSEDED]: "1" });
    const body = pinned(
      guardedPatch(seen, { metadata: { labels: { [ROLE]: "leader" } } }, { annotations: [SUPERSEDED] }),
    );
    expect(podLabelledLeader("p-1")(patchOf("p-1", body))).toBe(true);
    expect(podLabelled("p-1", "follower")(patchOf("p-1", body))).toBe(false);
    // Refused (the pod was fenced off meanwhile), or another pod: not this pod labelled.
    expect(podLabelledLeader("p-1")(patchOf("p-1", body, 422))).toBe(false);
    expect(podLabelledLeader("p-2")(patchOf("p-1", body))).toBe(false);
  });

  it("sees a self-label that brings the whole labels map as the pod labelled leader", () => {
    const body = pinned(
      guardedPatch(pod(), { metadata: { labels: { [ROLE]: "leader" } } }, { annotations: [SUPERSEDED] }),
    );
    expect(podLabelledLeader("p-1")(patchOf("p-1", body))).toBe(true);
  });

  it("sees a peer's demotion (a JSON patch) as the pod labelled follower", () => {
    const seen = pod({ [ROLE]: "leader" }, { "pglease.io/fence": "3" });
    const change = { metadata: { labels: { [ROLE]: "follower" }, annotations: { [SUPERSEDED]: "4" } } };
    const body = pinned(guardedPatch(seen, change, { labels: [ROLE], annotations: [SUPERSEDED] }));
    expect(podLabelled("p-1", "follower")(patchOf("p-1", body))).toBe(true);
    // The test operation names the old value "leader": only what the patch sets counts.
    expect(podLabelledLeader("p-1")(patchOf("p-1", body))).toBe(false);
  });

  it("still reads a follower's merge patch", () => {
    const body = { metadata: { labels: { [ROLE]: "follower" }, uid: UID } };
    expect(podLabelled("p-1", "follower")(patchOf("p-1", body))).toBe(true);
  });
});
