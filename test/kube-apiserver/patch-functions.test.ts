import { describe, expect, it } from "vitest";
import { applyJsonPatch, JsonPatchError } from "../support/kube/apiserver/patch/json-patch.ts";
import { applyMergePatch } from "../support/kube/apiserver/patch/merge-patch.ts";
import {
  applyPodStrategicMergePatch,
  StrategicMergePatchError,
} from "../support/kube/apiserver/patch/strategic-merge-patch.ts";

describe("merge patch (RFC 7386)", () => {
  it("merges nested objects, deletes on null, replaces arrays and scalars", () => {
    const target = { a: { b: 1, c: 2 }, list: [1, 2], keep: true };
    expect(applyMergePatch(target, { a: { c: null, d: 3 }, list: [3] })).toEqual({
      a: { b: 1, d: 3 },
      list: [3],
      keep: true,
    });
    expect(target).toEqual({ a: { b: 1, c: 2 }, list: [1, 2], keep: true });
  });
});

describe("JSON patch (RFC 6902)", () => {
  const doc = { metadata: { labels: { "a/b": "1", "t~x": "2" } }, list: [1, 2] };

  it("decodes ~1 and ~0, appends with '-', moves and copies", () => {
    expect(
      applyJsonPatch(doc, [
        { op: "remove", path: "/metadata/labels/a~1b" },
        { op: "replace", path: "/metadata/labels/t~0x", value: "3" },
        { op: "add", path: "/list/-", value: 3 },
        { op: "add", path: "/list/0", value: 0 },
        { op: "copy", from: "/list/3", path: "/last" },
        { op: "move", from: "/last", path: "/moved" },
      ]),
    ).toEqual({ metadata: { labels: { "t~x": "3" } }, list: [0, 1, 2, 3], moved: 3 });
  });

  it("rejects missing paths, bad indexes and unknown ops without touching the input", () => {
    expect(() => applyJsonPatch(doc, [{ op: "remove", path: "/metadata/annotations/x" }])).toThrow(
      JsonPatchError,
    );
    expect(() => applyJsonPatch(doc, [{ op: "replace", path: "/nope", value: 1 }])).toThrow(JsonPatchError);
    expect(() => applyJsonPatch(doc, [{ op: "add", path: "/list/7", value: 1 }])).toThrow(JsonPatchError);
    expect(() => applyJsonPatch(doc, [{ op: "merge", path: "/list" }])).toThrow("Unexpected kind: merge");
    expect(() => applyJsonPatch(doc, { op: "add" })).toThrow("must be an array");
    expect(doc.list).toEqual([1, 2]);
  });
});

describe("strategic merge patch for a Pod", () => {
  const pod = {
    metadata: { finalizers: ["a"], ownerReferences: [{ uid: "u1", name: "x" }] },
    spec: {
      containers: [
        { name: "app", image: "app:1", env: [{ name: "A", value: "1" }], args: ["--x"] },
        { name: "side", image: "side:1" },
      ],
      tolerations: [{ key: "k1" }],
    },
    status: {
      conditions: [
        { type: "Ready", status: "True" },
        { type: "PodScheduled", status: "True" },
      ],
    },
  };

  it("merges keyed lists by their key, nested ones included, and replaces lists without a strategy", () => {
    const patched = applyPodStrategicMergePatch(pod, {
      spec: {
        containers: [{ name: "app", env: [{ name: "B", value: "2" }], args: ["--y"] }],
        tolerations: [{ key: "k2" }],
      },
      metadata: { finalizers: ["b", "a"] },
    }) as typeof pod;
    expect(patched.spec.containers[0]).toEqual({
      name: "app",
      image: "app:1",
      env: [
        { name: "A", value: "1" },
        { name: "B", value: "2" },
      ],
      args: ["--y"],
    });
    expect(patched.spec.containers[1]?.name).toBe("side");
    expect(patched.spec.tolerations).toEqual([{ key: "k2" }]);
    expect(patched.metadata.finalizers).toEqual(["a", "b"]);
  });

  it("honours $patch: replace on a list, $deleteFromPrimitiveList and $setElementOrder", () => {
    const replaced = applyPodStrategicMergePatch(pod, {
      status: { conditions: [{ $patch: "replace" }, { type: "X", status: "True" }] },
    }) as typeof pod;
    expect(replaced.status.conditions).toEqual([{ type: "X", status: "True" }]);

    const pruned = applyPodStrategicMergePatch(pod, {
      metadata: { "$deleteFromPrimitiveList/finalizers": ["a"] },
    }) as typeof pod;
    expect(pruned.metadata.finalizers).toEqual([]);

    const reordered = applyPodStrategicMergePatch(pod, {
      status: {
        "$setElementOrder/conditions": [{ type: "PodScheduled" }, { type: "Ready" }],
        conditions: [{ type: "Ready", status: "False" }],
      },
    }) as typeof pod;
    expect(reordered.status.conditions).toEqual([
      { type: "PodScheduled", status: "True" },
      { type: "Ready", status: "False" },
    ]);
  });

  it("fails on a keyed-list item without its merge key, as the real server does (500)", () => {
    const run = () => applyPodStrategicMergePatch(pod, { status: { conditions: [{ status: "True" }] } });
    expect(run).toThrow(StrategicMergePatchError);
    expect(run).toThrow("does not contain declared merge key: type");
  });
});
