// The in-process API server against the real one: each probe sends the same requests, with the
// same ServiceAccount identity and Role, to both, and what the in-process server answers must equal
// what the real kube-apiserver answers (identity, resourceVersions and server clocks left out).
// Where the model knowingly differs, the probe pins both answers and says why.
import {
  AuthorizationV1Api,
  CoreV1Api,
  EventsV1Api,
  PatchStrategy,
  setHeaderOptions,
  type V1Pod,
  Watch,
} from "@kubernetes/client-node";
import { afterAll, describe, expect, it } from "vitest";
import { failureOf } from "../support/kube/apiserver/client.ts";
import { type KubeServerKind, kubeServers, type TestKube } from "../support/kube/kube-servers.ts";

const NS = "fidelity";
const merge = setHeaderOptions("Content-Type", PatchStrategy.MergePatch);
const strategic = setHeaderOptions("Content-Type", PatchStrategy.StrategicMergePatch);

const RULES = [
  {
    apiGroups: [""],
    resources: ["pods", "pods/status"],
    verbs: ["get", "list", "watch", "create", "update", "patch"],
  },
  { apiGroups: ["", "events.k8s.io"], resources: ["events"], verbs: ["create", "get", "list"] },
];

interface Probe {
  kube: TestKube;
  core: CoreV1Api;
}

const kinds = await kubeServers("fidelity suite");
const real = kinds.find((k) => k.name === "real");
const inProcess = kinds.find((k) => k.name === "in-process");
afterAll(() => real?.release());

async function on(kind: KubeServerKind, run: (probe: Probe) => Promise<unknown>): Promise<unknown> {
  const kube = await kind.start({ namespace: NS, rules: RULES });
  try {
    await kube.seedPod({ metadata: { name: "p1", namespace: NS, labels: { app: "db" } } });
    return await run({ kube, core: kube.kubeConfig({ namespace: NS }).makeApiClient(CoreV1Api) });
  } finally {
    await kube.close();
  }
}

/** Both servers' answers, the real one first. */
async function both(run: (probe: Probe) => Promise<unknown>): Promise<[unknown, unknown]> {
  if (!real || !inProcess) throw new Error("needs both servers");
  return [await on(real, run), await on(inProcess, run)];
}

function same(name: string, run: (probe: Probe) => Promise<unknown>): void {
  it(name, async () => {
    const [onReal, onInProcess] = await both(run);
    expect(onInProcess).toEqual(onReal);
  });
}

/** What pglease reads of a pod. */
function shape(pod: V1Pod | undefined) {
  return {
    labels: pod?.metadata?.labels,
    annotations: pod?.metadata?.annotations,
    phase: pod?.status?.phase,
    conditions: (pod?.status?.conditions ?? [])
      .map((c) => ({ ...c, lastTransitionTime: c.lastTransitionTime?.toISOString() }))
      .map(({ lastProbeTime: _, observedGeneration: __, ...c }) =>
        c.type === "pglease.io/leader" ? c : { type: c.type, status: c.status },
      )
      .sort((a, b) => a.type.localeCompare(b.type)),
  };
}

async function failure(call: Promise<unknown>) {
  const { code, status } = await failureOf(call);
  return { code, reason: status.reason, message: status.message, details: status.details };
}

describe.skipIf(!real || !inProcess)("the in-process API server answers as the real one does", () => {
  same("merge patch on the pod: labels and annotations set and deleted by null, .status ignored", async (p) =>
    shape(
      await p.core.patchNamespacedPod(
        {
          name: "p1",
          namespace: NS,
          body: {
            metadata: { labels: { "pglease.io/role": "leader", app: null }, annotations: { a: "1" } },
            status: { phase: "Failed" },
          },
        },
        merge,
      ),
    ),
  );

  same(
    "json patch on the pod: a missing member tests equal to null; a failed test is refused whole",
    async (p) => {
      const json = setHeaderOptions("Content-Type", PatchStrategy.JsonPatch);
      const patch = (body: unknown) => p.core.patchNamespacedPod({ name: "p1", namespace: NS, body }, json);
      // p1 has no annotations: the map itself tests as null, then comes whole.
      const added = shape(
        await patch([
          { op: "test", path: "/metadata/annotations", value: null },
          { op: "add", path: "/metadata/annotations", value: { "pglease.io/lease": "orders" } },
        ]),
      );
      const guarded = shape(
        await patch([
          { op: "test", path: "/metadata/annotations/pglease.io~1superseded-by", value: null },
          { op: "add", path: "/metadata/labels/pglease.io~1role", value: "leader" },
        ]),
      );
      const refused = await failure(
        patch([
          { op: "test", path: "/metadata/annotations/pglease.io~1lease", value: null },
          { op: "add", path: "/metadata/labels/pglease.io~1role", value: "follower" },
        ]),
      );
      const after = shape(await p.core.readNamespacedPod({ name: "p1", namespace: NS }));
      return { added, guarded, refused: { code: refused.code, reason: refused.reason }, after };
    },
  );

  same(
    "strategic merge on pods/status: merged by type, lastTransitionTime kept when left out, whole seconds",
    async (p) => {
      const leader = { type: "pglease.io/leader", status: "True", reason: "LeaseHeld", message: "fence 1" };
      const first = new Date("2030-01-02T03:04:05.678Z");
      await p.core.patchNamespacedPodStatus(
        {
          name: "p1",
          namespace: NS,
          body: { status: { conditions: [{ ...leader, lastTransitionTime: first }] } },
        },
        strategic,
      );
      return shape(
        await p.core.patchNamespacedPodStatus(
          {
            name: "p1",
            namespace: NS,
            body: { status: { conditions: [{ ...leader, message: "fence 2" }] } },
          },
          strategic,
        ),
      );
    },
  );

  same("merge patch on pods/status replaces the whole conditions list", async (p) =>
    shape(
      await p.core.patchNamespacedPodStatus(
        {
          name: "p1",
          namespace: NS,
          body: { status: { conditions: [{ type: "pglease.io/leader", status: "False" }] } },
        },
        merge,
      ),
    ),
  );

  same("a patch that changes nothing keeps the resourceVersion", async (p) => {
    const body = { metadata: { labels: { app: "db" } } };
    const before = await p.core.readNamespacedPod({ name: "p1", namespace: NS });
    const after = await p.core.patchNamespacedPod({ name: "p1", namespace: NS, body }, merge);
    return after.metadata?.resourceVersion === before.metadata?.resourceVersion;
  });

  same("a graceful deletion marks the pod: the deletion timestamp is the grace period ahead", async (p) => {
    await p.kube.deletePod(NS, "p1", 30);
    const meta = (await p.kube.pod(NS, "p1"))?.metadata;
    // kube-apiserver: now plus the grace period (rest.BeforeDelete), in whole seconds.
    const aheadS = (new Date(meta?.deletionTimestamp as Date | string).getTime() - Date.now()) / 1000;
    return { grace: meta?.deletionGracePeriodSeconds, aheadAboutTheGrace: aheadS > 25 && aheadS <= 31 };
  });
  same("403 for a verb the Role lacks, naming user, verb, resource and namespace", async (p) =>
    failure(p.core.deleteNamespacedPod({ name: "p1", namespace: NS })),
  );

  same("404 for a missing pod; 409 for a PUT at a stale resourceVersion", async (p) => {
    const stale = await p.core.readNamespacedPod({ name: "p1", namespace: NS });
    await p.kube.mutatePod(NS, "p1", (pod) => {
      pod.metadata = { ...pod.metadata, annotations: { touched: "yes" } };
    });
    return [
      await failure(p.core.readNamespacedPod({ name: "nope", namespace: NS })),
      await failure(p.core.replaceNamespacedPod({ name: "p1", namespace: NS, body: stale })),
    ];
  });

  // The publisher pins its patches to its pod's uid: a pod recreated under the same name (a
  // force-deleted StatefulSet pod's next incarnation) must refuse them, and the pod it is must take them.
  same(
    "422 for a merge patch or a strategic pods/status patch carrying another uid, 409 for a PUT; the pod's own uid is taken",
    async (p) => {
      const uid = (await p.core.readNamespacedPod({ name: "p1", namespace: NS })).metadata?.uid;
      const other = "00000000-0000-4000-8000-000000000000";
      const condition = { type: "pglease.io/leader", status: "True", reason: "LeaseHeld", message: "m" };
      const label = (u: string | undefined) => ({
        metadata: { uid: u, labels: { "pglease.io/role": "leader" } },
      });
      const status = (u: string | undefined) => ({
        metadata: { uid: u },
        status: { conditions: [condition] },
      });
      const refused = [
        await failure(p.core.patchNamespacedPod({ name: "p1", namespace: NS, body: label(other) }, merge)),
        await failure(
          p.core.patchNamespacedPodStatus({ name: "p1", namespace: NS, body: status(other) }, strategic),
        ),
        await failure(
          p.core.patchNamespacedPod(
            {
              name: "p1",
              namespace: NS,
              body: [
                { op: "add", path: "/metadata/uid", value: other },
                { op: "add", path: "/metadata/labels/pglease.io~1role", value: "leader" },
              ],
            },
            setHeaderOptions("Content-Type", PatchStrategy.JsonPatch),
          ),
        ),
        // A PUT's uid is a precondition of the storage layer: a Conflict, not a validation error.
        await failure(
          p.core.replaceNamespacedPod({
            name: "p1",
            namespace: NS,
            body: {
              ...(await p.core.readNamespacedPod({ name: "p1", namespace: NS })),
              metadata: { name: "p1", uid: other },
            },
          }),
        ),
      ].map((f) => ({ ...f, message: f.message?.replace(uid ?? "", "<uid>") }));
      const untouched = shape(await p.core.readNamespacedPod({ name: "p1", namespace: NS }));
      await p.core.patchNamespacedPod({ name: "p1", namespace: NS, body: label(uid) }, merge);
      const taken = await p.core.patchNamespacedPodStatus(
        { name: "p1", namespace: NS, body: status(uid) },
        strategic,
      );
      return { refused, untouched, taken: shape(taken), uidKept: taken.metadata?.uid === uid };
    },
  );

  same("422 for an invalid label value and for an annotation key", async (p) => [
    (
      await failure(
        p.core.patchNamespacedPod(
          { name: "p1", namespace: NS, body: { metadata: { labels: { a: "-bad-" } } } },
          merge,
        ),
      )
    ).code,
    (
      await failure(
        p.core.patchNamespacedPod(
          { name: "p1", namespace: NS, body: { metadata: { annotations: { "bad key!": "x" } } } },
          merge,
        ),
      )
    ).code,
  ]);

  same("SelfSubjectAccessReview answers by the Role", async (p) => {
    const api = p.kube.kubeConfig({ namespace: NS }).makeApiClient(AuthorizationV1Api);
    const ask = async (verb: string, resource: string, subresource?: string) =>
      (
        await api.createSelfSubjectAccessReview({
          body: {
            spec: {
              resourceAttributes: {
                namespace: NS,
                verb,
                group: "",
                resource,
                ...(subresource ? { subresource } : {}),
              },
            },
          },
        })
      ).status?.allowed;
    return [await ask("patch", "pods", "status"), await ask("delete", "pods"), await ask("watch", "pods")];
  });

  // Items' kind and apiVersion (kept by the in-process server's events.k8s.io list and direct read,
  // dropped by the real one) and an unset eventTime (null on the real server, absent on the
  // in-process one) are left out here: "known differences" below pins them.
  same("an Event as pglease posts it reads back through core/v1 and events.k8s.io/v1", async (p) => {
    const at = new Date("2030-01-02T03:04:05.678Z");
    const pod = await p.core.readNamespacedPod({ name: "p1", namespace: NS });
    await p.core.createNamespacedEvent({
      namespace: NS,
      body: {
        metadata: { name: "p1.17f0a1b2c3d4e5f6", namespace: NS },
        involvedObject: { apiVersion: "v1", kind: "Pod", name: "p1", namespace: NS, uid: pod.metadata?.uid },
        reason: "LeaderElected",
        message: "p1 became leader",
        type: "Normal",
        source: { component: "pglease" },
        reportingComponent: "pglease",
        reportingInstance: "p1",
        firstTimestamp: at,
        lastTimestamp: at,
        count: 1,
      },
    });
    const [core] = (await p.kube.events(NS)).map(
      ({ metadata: _, kind: __, apiVersion: ___, involvedObject, eventTime, ...e }) => ({
        ...e,
        involvedObject: { ...involvedObject, uid: involvedObject.uid === pod.metadata?.uid },
        eventTime: eventTime ?? null,
        firstTimestamp: e.firstTimestamp?.toISOString(),
        lastTimestamp: e.lastTimestamp?.toISOString(),
      }),
    );
    const events = p.kube.kubeConfig({ namespace: NS }).makeApiClient(EventsV1Api);
    const [v1] = (await events.listNamespacedEvent({ namespace: NS })).items.map(
      ({
        metadata: _,
        kind: __,
        apiVersion: ___,
        eventTime,
        regarding,
        deprecatedFirstTimestamp,
        deprecatedLastTimestamp,
        ...e
      }) => ({
        ...e,
        regarding: { ...regarding, uid: regarding?.uid === pod.metadata?.uid },
        deprecatedFirstTimestamp: deprecatedFirstTimestamp?.toISOString(),
        deprecatedLastTimestamp: deprecatedLastTimestamp?.toISOString(),
        eventTime: eventTime ?? null,
      }),
    );
    return { core, v1 };
  });

  same(
    "a watch on one pod by field selector: the pod ADDED, then each change MODIFIED, others unseen",
    async (p) => {
      await p.kube.seedPod({ metadata: { name: "p2", namespace: NS } });
      const seen: string[] = [];
      let changed = () => {};
      const twoEvents = new Promise<void>((resolve) => {
        changed = () => {
          if (seen.length === 3) resolve();
        };
      });
      const request = await new Watch(p.kube.kubeConfig({ namespace: NS })).watch(
        `/api/v1/namespaces/${NS}/pods`,
        { fieldSelector: "metadata.name=p1" },
        (type: string, pod: V1Pod) => {
          seen.push(`${type} ${pod.metadata?.name} ${pod.metadata?.labels?.x ?? "-"}`);
          changed();
        },
        () => {},
      );
      try {
        for (const x of ["1", "2"]) {
          await p.core.patchNamespacedPod(
            { name: "p2", namespace: NS, body: { metadata: { labels: { x } } } },
            merge,
          );
          await p.core.patchNamespacedPod(
            { name: "p1", namespace: NS, body: { metadata: { labels: { x } } } },
            merge,
          );
        }
        await twoEvents;
      } finally {
        request.abort();
      }
      return seen;
    },
  );

  it("known differences: events.k8s.io list items, an unset eventTime, labels sent to pods/status", async () => {
    const [onReal, onInProcess] = await both(async (p) => {
      await p.core.createNamespacedEvent({
        namespace: NS,
        body: {
          metadata: { name: "p1.e1" },
          involvedObject: { kind: "Pod", name: "p1", namespace: NS },
          reason: "LeaderElected",
          message: "m",
          type: "Normal",
        },
      });
      const raw = (await p.core.listNamespacedEvent({ namespace: NS })).items[0];
      const events = p.kube.kubeConfig({ namespace: NS }).makeApiClient(EventsV1Api);
      const v1 = (await events.listNamespacedEvent({ namespace: NS })).items[0];
      const patched = await p.core.patchNamespacedPodStatus(
        {
          name: "p1",
          namespace: NS,
          body: { metadata: { labels: { x: "y" } }, status: { phase: "Running" } },
        },
        strategic,
      );
      return {
        v1ItemKind: v1?.kind,
        eventTime: raw?.eventTime,
        statusPatchLabel: patched.metadata?.labels?.x,
      };
    });
    // pglease reads neither list items' kind nor eventTime, and never sends labels to pods/status.
    expect(onReal).toEqual({ v1ItemKind: undefined, eventTime: null, statusPatchLabel: "y" });
    expect(onInProcess).toEqual({ v1ItemKind: "Event", eventTime: undefined, statusPatchLabel: undefined });
  });
});
