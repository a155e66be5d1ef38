import {
  CoreV1Api,
  EventsV1Api,
  type EventsV1Event,
  PatchStrategy,
  setHeaderOptions,
} from "@kubernetes/client-node";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { failureOf } from "../support/kube/apiserver/client.ts";
import { type KubeApiServer, startKubeApiServer } from "../support/kube/apiserver/index.ts";

let server: KubeApiServer;
let core: CoreV1Api;
let events: EventsV1Api;
const merge = setHeaderOptions("Content-Type", PatchStrategy.MergePatch);

beforeEach(async () => {
  server = await startKubeApiServer();
  core = server.kubeConfig().makeApiClient(CoreV1Api);
  events = server.kubeConfig().makeApiClient(EventsV1Api);
  server.seedPod({ metadata: { name: "p1", namespace: "ns" } });
});
afterEach(async () => {
  await server.close();
});

describe("events", () => {
  it("keeps a core/v1 event, fills its metadata, and lists it through both APIs", async () => {
    const created = await core.createNamespacedEvent({
      namespace: "ns",
      body: {
        metadata: { generateName: "p1." },
        involvedObject: { kind: "Pod", name: "p1", namespace: "ns" },
        reason: "LeaderElected",
        message: "fence 7",
        type: "Normal",
      },
    });
    expect(created.metadata.name).toMatch(/^p1\.[a-z0-9]{5}$/);
    expect(created.metadata.uid).toBeTruthy();
    expect(created.metadata.resourceVersion).toBeTruthy();
    const [stored] = server.events("ns");
    expect(stored).toMatchObject({
      reason: "LeaderElected",
      message: "fence 7",
      involvedObject: { name: "p1" },
    });
    const viaV1 = await events.listNamespacedEvent({ namespace: "ns" });
    expect(viaV1.items.map((e) => [e.regarding?.name, e.note])).toEqual([["p1", "fence 7"]]);
  });

  it("keeps an events.k8s.io/v1 event and shows it in core/v1 form", async () => {
    await events.createNamespacedEvent({
      namespace: "ns",
      body: {
        metadata: { name: "p1.lost" },
        eventTime: new Date(),
        regarding: { kind: "Pod", name: "p1", namespace: "ns" },
        reason: "LeadershipLost",
        note: "fence 8",
        type: "Warning",
        action: "Demote",
        reportingController: "pglease.io/elector",
        reportingInstance: "p1",
      },
    });
    expect(server.events("ns").map((e) => [e.involvedObject.name, e.reason, e.message])).toEqual([
      ["p1", "LeadershipLost", "fence 8"],
    ]);
    const viaCore = await core.listNamespacedEvent({
      namespace: "ns",
      fieldSelector: "involvedObject.name=p1",
    });
    expect(viaCore.items.map((e) => e.reportingComponent)).toEqual(["pglease.io/elector"]);
  });

  it("rejects an events.k8s.io/v1 event without eventTime, action or reportingController (422)", async () => {
    const failure = await failureOf(
      events.createNamespacedEvent({
        namespace: "ns",
        // Deliberately incomplete: the typed model would not let this reach the server otherwise.
        body: {
          metadata: { name: "bad" },
          regarding: { name: "p1" },
          reason: "R",
          type: "Normal",
        } as EventsV1Event,
      }),
    );
    expect(failure.code).toBe(422);
    expect(failure.status.details?.causes?.map((c) => c.field).sort()).toEqual([
      "action",
      "eventTime",
      "reportingController",
      "reportingInstance",
    ]);
  });
});

describe("label and annotation validation (422 Invalid)", () => {
  it("rejects a label value that is not a valid label, with the real message", async () => {
    const failure = await failureOf(
      core.patchNamespacedPod(
        { name: "p1", namespace: "ns", body: { metadata: { labels: { role: "leader!" } } } },
        merge,
      ),
    );
    expect(failure.code).toBe(422);
    expect(failure.status.reason).toBe("Invalid");
    expect(failure.status.message).toBe(
      `Pod "p1" is invalid: metadata.labels: Invalid value: "leader!": a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')`,
    );
  });

  it("rejects a label value of 64 characters and accepts 63", async () => {
    const patch = (value: string) =>
      core.patchNamespacedPod(
        { name: "p1", namespace: "ns", body: { metadata: { labels: { v: value } } } },
        merge,
      );
    const failure = await failureOf(patch("a".repeat(64)));
    expect(failure.status.message).toContain("must be no more than 63 characters");
    await expect(patch("a".repeat(63))).resolves.toBeDefined();
  });

  it("checks label keys as qualified names with an optional DNS-subdomain prefix", async () => {
    const patch = (key: string) =>
      core.patchNamespacedPod(
        { name: "p1", namespace: "ns", body: { metadata: { labels: { [key]: "x" } } } },
        merge,
      );
    await expect(patch("pglease.io/role")).resolves.toBeDefined();
    expect((await failureOf(patch("Pglease.IO/role"))).status.message).toContain(
      "prefix part a lowercase RFC 1123 subdomain",
    );
    expect((await failureOf(patch("a/b/c"))).status.message).toContain("a qualified name must consist of");
    expect((await failureOf(patch(`${"x".repeat(254)}/role`))).status.message).toContain(
      "prefix part must be no more than 253 characters",
    );
  });

  it("limits annotations to 256 KiB in total", async () => {
    const patch = (size: number) =>
      core.patchNamespacedPod(
        { name: "p1", namespace: "ns", body: { metadata: { annotations: { big: "x".repeat(size) } } } },
        merge,
      );
    const failure = await failureOf(patch(256 * 1024));
    expect(failure.status.message).toBe(
      'Pod "p1" is invalid: metadata.annotations: Too long: must have at most 262144 bytes',
    );
    await expect(patch(256 * 1024 - 3)).resolves.toBeDefined();
  });

  it("rejects a label value that is not a string (400, like the real decoder)", async () => {
    const failure = await failureOf(
      core.patchNamespacedPod(
        { name: "p1", namespace: "ns", body: { metadata: { labels: { n: 5 } } } },
        merge,
      ),
    );
    expect(failure.code).toBe(400);
  });

  it("a test seeding a bad label fails at once, naming it", () => {
    expect(() => server.seedPod({ metadata: { name: "p2", labels: { "bad key": "x" } } })).toThrow(
      /metadata\.labels: "bad key"/,
    );
  });
});
