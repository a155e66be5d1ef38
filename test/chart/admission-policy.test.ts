// The chart's ValidatingAdmissionPolicy on the real kube-apiserver: installed as helm renders it,
// then the sidecar's ServiceAccount, with a real token, sends the patches pglease sends (allowed)
// and the ones a leaked token would (refused, with the policy's message). Plus what helm renders
// where the cluster lacks the API, or the user turns the policy off.
import { mkdir, mkdtemp, readFile, rm, symlink, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { CoreV1Api, KubeConfig, PatchStrategy, setHeaderOptions, type V1Pod } from "@kubernetes/client-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ADMISSION_POLICY_API, kubeTools, renderChart, repoRoot } from "../support/kube/chart.ts";
import {
  type RealKubeApiServer,
  realKubeApiServerAvailable,
  startRealKubeApiServer,
} from "../support/kube/real-kube-apiserver.ts";
import {
  type ChartIdentity,
  createRunningPod,
  installChartRbac,
  readPod,
} from "../support/kube/real-kube-cluster.ts";
import { skipBecause } from "../support/skip.ts";
import { renderChartDir } from "./helm.ts";
import { type Manifest, parseManifests } from "./kubernetes-schemas.ts";

const tools = await kubeTools();
const server = await realKubeApiServerAvailable();
const skipRender = skipBecause("admission policy rendering", !tools.ok && tools.reason);
const skipServer = skipBecause(
  "admission policy on the real kube-apiserver",
  (!tools.ok && tools.reason) || (!server.ok && server.reason),
);

const NS = "shop";
const RELEASE = "orders";
/** The chart's selector labels for release "orders": the pods the policy lets the account patch. */
const OWN_LABELS = { "app.kubernetes.io/name": "pglease", "app.kubernetes.io/instance": RELEASE };
const POLICY = `orders-pglease.${NS}.pglease.io`;
const exampleChart = join(repoRoot, "deploy", "examples", "existing-chart");

const policiesIn = (manifests: Manifest[]) =>
  manifests
    .filter((m) => m.kind.startsWith("ValidatingAdmissionPolicy"))
    .map((m) => `${m.kind} ${m.metadata.name}`);

describe.skipIf(skipRender)("the chart's admission policy, as rendered", () => {
  it("is rendered, named by release and namespace, where the API server serves it", async () => {
    const manifests = await renderChart(
      {},
      { release: RELEASE, namespace: NS, apiVersions: [ADMISSION_POLICY_API] },
    );
    expect(policiesIn(manifests)).toEqual([
      `ValidatingAdmissionPolicy ${POLICY}`,
      `ValidatingAdmissionPolicyBinding ${POLICY}`,
    ]);
  });

  it("is left out where the API server lacks it, and when admissionPolicy.create is false", async () => {
    expect(policiesIn(await renderChart({}, { release: RELEASE, namespace: NS }))).toEqual([]);
    const off = await renderChart(
      { admissionPolicy: { create: false } },
      { release: RELEASE, namespace: NS, apiVersions: [ADMISSION_POLICY_API] },
    );
    expect(policiesIn(off)).toEqual([]);
  });

  it("is what the library renders, in the plain manifest of deploy/sidecar and the example chart", async () => {
    const plain = (
      await readFile(join(repoRoot, "deploy", "sidecar", "admission-policy.yaml"), "utf8")
    ).replaceAll("my-namespace", NS);
    const library = { name: "pglease", admissionPolicy: { create: true, podLabels: { app: "my-app" } } };
    expect(await renderLibraryPolicy(library)).toEqual(parseManifests(plain, "admission-policy.yaml"));
    const example = await renderChartDir(exampleChart, {}, RELEASE, [ADMISSION_POLICY_API]);
    expect(policiesIn(example)).toEqual([
      `ValidatingAdmissionPolicy ${POLICY}`,
      `ValidatingAdmissionPolicyBinding ${POLICY}`,
    ]);
    // The example's pods: the policy requires each label of its Deployment's selector.
    const deployment = example.find((m) => m.kind === "Deployment") as unknown as {
      spec: { selector: { matchLabels: Record<string, string> } };
    };
    const policy = example.find((m) => m.kind === "ValidatingAdmissionPolicy") as unknown as {
      spec: { validations: { expression: string }[] };
    };
    const required = [
      ...(policy.spec.validations[0]?.expression ?? "").matchAll(
        /oldLabels\[\?"([^"]+)"\] == optional\.of\("([^"]*)"\)/g,
      ),
    ].map((m) => [m[1], m[2]]);
    expect(Object.fromEntries(required)).toEqual(deployment.spec.selector.matchLabels);
  });
});

describe.skipIf(skipServer)("the chart's admission policy on the real kube-apiserver", () => {
  let kube: RealKubeApiServer;
  let admin: KubeConfig;
  let identity: ChartIdentity;
  let asAccount: CoreV1Api;

  beforeAll(async () => {
    kube = await startRealKubeApiServer();
    admin = kube.admin();
    identity = await installChartRbac(admin, NS, {}, { release: RELEASE, admissionPolicy: true });
    const account = new KubeConfig();
    account.loadFromOptions({
      clusters: [{ name: "real", server: kube.info.server, caFile: kube.info.caFile }],
      users: [{ name: "account", token: identity.token }],
      contexts: [{ name: "account", cluster: "real", user: "account" }],
      currentContext: "account",
    });
    asAccount = account.makeApiClient(CoreV1Api);
    const pod = (name: string, labels: Record<string, string>): V1Pod => ({
      metadata: { name, labels, annotations: { "example.com/owner": "team-a" } },
    });
    await createRunningPod(admin, NS, pod("orders-a", { ...OWN_LABELS, tier: "web" }));
    await createRunningPod(admin, NS, pod("payments-a", { app: "payments", "pglease.io/role": "leader" }));
  }, 180_000);

  afterAll(async () => {
    await kube?.close();
  });

  /** A JSON merge patch of the pod's metadata, as the publisher sends labels and annotations. */
  const patchMetadata = (name: string, metadata: Record<string, unknown>) =>
    asAccount.patchNamespacedPod({ namespace: NS, name, body: { metadata } }, mergePatch);
  /** A strategic merge patch of pods/status, as the publisher sends its condition. */
  const patchStatus = (name: string, status: Record<string, unknown>) =>
    asAccount.patchNamespacedPodStatus({ namespace: NS, name, body: { status } }, strategicPatch);

  /** The API server's answer: "allowed", or the refusal's message. */
  const answer = (request: Promise<unknown>) =>
    request.then(
      () => "allowed",
      (error: { code?: number; body?: string }) => {
        const body = JSON.parse(error.body ?? "{}") as { message?: string };
        return `${error.code} ${body.message ?? error}`;
      },
    );
  const refusedBy = (message: string) =>
    expect.stringMatching(
      new RegExp(
        `^403 .*ValidatingAdmissionPolicy '${literal(POLICY)}' .*denied request: ${literal(message)}`,
      ),
    );

  it("allows what pglease writes on its own pods: the role label, its annotations, its condition", async () => {
    expect(
      await answer(
        patchMetadata("orders-a", {
          labels: { "pglease.io/role": "leader" },
          annotations: {
            "pglease.io/fence": "7",
            "pglease.io/holder": "orders-a",
            "pglease.io/lease": "orders",
            "pglease.io/not-campaigning": "unready",
            "pglease.io/superseded-by": "orders-b",
          },
        }),
      ),
    ).toBe("allowed");
    const condition = {
      type: "pglease.io/leader",
      status: "True",
      reason: "LeaseHeld",
      lastTransitionTime: new Date(),
    };
    expect(await answer(patchStatus("orders-a", { conditions: [condition] }))).toBe("allowed");
    // A new leader demoting a peer: the label back to follower, the fence and holder removed.
    expect(
      await answer(
        patchMetadata("orders-a", {
          labels: { "pglease.io/role": "follower" },
          annotations: { "pglease.io/fence": null, "pglease.io/holder": null },
        }),
      ),
    ).toBe("allowed");
    const pod = await readPod(admin, NS, "orders-a");
    expect(pod?.metadata?.labels?.["pglease.io/role"]).toBe("follower");
    expect(pod?.status?.conditions?.find((c) => c.type === "pglease.io/leader")?.status).toBe("True");
  });

  it("refuses the role label on another workload's pod", async () => {
    expect(await answer(patchMetadata("payments-a", { labels: { "pglease.io/role": "follower" } }))).toEqual(
      refusedBy("pglease's service account may change only pods of its own workload"),
    );
  });

  it("refuses any other label, annotation, the spec, another condition and other status on its own pods", async () => {
    const noLabel = refusedBy("pglease's service account may change no label but pglease.io/role");
    expect(await answer(patchMetadata("orders-a", { labels: { tier: "db" } }))).toEqual(noLabel);
    expect(await answer(patchMetadata("orders-a", { labels: { tier: null } }))).toEqual(noLabel);
    expect(
      await answer(patchMetadata("orders-a", { labels: { "app.kubernetes.io/instance": "payments" } })),
    ).toEqual(noLabel);
    const noAnnotation = refusedBy("pglease's service account may change no annotation but pglease.io/*");
    expect(
      await answer(patchMetadata("orders-a", { annotations: { "example.com/owner": "team-b" } })),
    ).toEqual(noAnnotation);
    expect(await answer(patchMetadata("orders-a", { annotations: { "example.com/new": "x" } }))).toEqual(
      noAnnotation,
    );
    const noSpec = refusedBy("pglease's service account may not change a pod's spec, finalizers or owners");
    expect(
      await answer(
        asAccount.patchNamespacedPod(
          {
            namespace: NS,
            name: "orders-a",
            body: { spec: { containers: [{ name: "app", image: "evil:1" }] } },
          },
          strategicPatch,
        ),
      ),
    ).toEqual(noSpec);
    expect(await answer(patchMetadata("orders-a", { finalizers: ["example.com/hold"] }))).toEqual(noSpec);
    const noStatus = refusedBy(
      "pglease's service account may change no pod condition but pglease.io/leader, and no other status",
    );
    const ready = { type: "Ready", status: "False", lastTransitionTime: new Date() };
    expect(await answer(patchStatus("orders-a", { conditions: [ready] }))).toEqual(noStatus);
    expect(await answer(patchStatus("orders-a", { reason: "Evicted", message: "drained" }))).toEqual(
      noStatus,
    );
    const pod = await readPod(admin, NS, "orders-a");
    expect(pod?.metadata?.labels).toMatchObject({ tier: "web", "app.kubernetes.io/instance": RELEASE });
    expect(pod?.spec?.containers.map((c) => c.image)).not.toContain("evil:1");
  });

  it("leaves everyone else alone: the admin changes any label", async () => {
    const core = admin.makeApiClient(CoreV1Api);
    await core.patchNamespacedPod(
      { namespace: NS, name: "payments-a", body: { metadata: { labels: { x: "y" } } } },
      mergePatch,
    );
    expect((await readPod(admin, NS, "payments-a"))?.metadata?.labels?.x).toBe("y");
  });

  it("compares every field of PodStatus this API server knows but conditions", async () => {
    // A field the policy does not list would escape it: the server's own schema is the list.
    const openapi = await fetchJson(kube, "/openapi/v3/api/v1");
    const schemas = (openapi as { components: { schemas: Record<string, { properties: object }> } })
      .components.schemas;
    const known = Object.keys(schemas["io.k8s.api.core.v1.PodStatus"]?.properties ?? {}).filter(
      (f) => f !== "conditions",
    );
    const policy = (
      await renderChart({}, { release: RELEASE, namespace: NS, apiVersions: [ADMISSION_POLICY_API] })
    ).find((m) => m.kind === "ValidatingAdmissionPolicy") as unknown as {
      spec: { validations: { expression: string }[] };
    };
    const compared = policy.spec.validations.flatMap((v) =>
      [...v.expression.matchAll(/object\.status\.\?(\w+) == oldObject\.status\.\?\1/g)].map((m) => m[1]),
    );
    expect(compared.sort()).toEqual(known.sort());
  });
});

const mergePatch = setHeaderOptions("Content-Type", PatchStrategy.MergePatch);
const strategicPatch = setHeaderOptions("Content-Type", PatchStrategy.StrategicMergePatch);

function literal(text: string): string {
  return text.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
}

/** The library's policy alone, rendered by a chart that includes nothing else. */
async function renderLibraryPolicy(pglease: Record<string, unknown>): Promise<Manifest[]> {
  const dir = await mkdtemp(join(tmpdir(), "pglease-policy-chart-"));
  try {
    await mkdir(join(dir, "charts"));
    await mkdir(join(dir, "templates"));
    await symlink(join(repoRoot, "charts", "pglease-sidecar"), join(dir, "charts", "pglease-sidecar"));
    await writeFile(
      join(dir, "Chart.yaml"),
      "apiVersion: v2\nname: plain\nversion: 0.1.0\ndependencies:\n  - name: pglease-sidecar\n    version: 0.1.0\n",
    );
    await writeFile(
      join(dir, "templates", "policy.yaml"),
      '{{- include "pglease-sidecar.admissionPolicy" (dict "context" . "config" .Values.pglease) }}\n',
    );
    return await renderChartDir(dir, { pglease }, "plain", [ADMISSION_POLICY_API]);
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

async function fetchJson(kube: RealKubeApiServer, path: string): Promise<unknown> {
  const core = kube.admin();
  const options: { headers?: Record<string, string> } & Record<string, unknown> = {};
  await core.applyToHTTPSOptions(options);
  const { request } = await import("node:https");
  return new Promise((resolve, reject) => {
    const req = request(`${kube.info.server}${path}`, options, (res) => {
      const chunks: Buffer[] = [];
      res.on("data", (c: Buffer) => chunks.push(c));
      res.on("end", () => resolve(JSON.parse(Buffer.concat(chunks).toString())));
    });
    req.on("error", reject);
    req.end();
  });
}
