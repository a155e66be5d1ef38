// The `helm test` pod's script, exactly as the chart renders it, run by node against a local
// HTTPS server standing in for the API server's EndpointSlice list: it passes on one ready pod
// (counted once across address families) and fails, naming what it saw, on two. The pod itself
// carries no label a selector of the release matches.
import { execFile } from "node:child_process";
import { mkdir, mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { createServer, type Server } from "node:https";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { isHelmHook, kubeTools, renderChart } from "../support/kube/chart.ts";
import { skipBecause } from "../support/skip.ts";
import type { Manifest } from "./kubernetes-schemas.ts";

const run = promisify(execFile);
const SERVICE_ACCOUNT_DIR = "/var/run/secrets/kubernetes.io/serviceaccount";

const tools = await kubeTools();
const openssl = await run("openssl", ["version"]).then(
  () => true,
  () => false,
);
const skip = skipBecause(
  "helm test pod script",
  (!tools.ok && tools.reason) || (!openssl && "no openssl to make the test server's certificate"),
);

interface Endpoint {
  addresses: string[];
  conditions?: { ready?: boolean };
  targetRef?: { kind: string; name: string };
}
const endpoint = (pod: string, address: string, ready = true): Endpoint => ({
  addresses: [address],
  conditions: { ready },
  targetRef: { kind: "Pod", name: pod },
});

describe.skipIf(skip)("helm test pod", () => {
  let dir: string;
  let server: Server;
  let port: number;
  let slices: { endpoints: Endpoint[] | null }[] = [];
  const requests: { url: string; authorization: string | undefined }[] = [];
  let container: { command: string[]; args: string[]; env: { name: string; value: string }[] };

  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), "pglease-helm-test-"));
    await run("openssl", [
      "req",
      "-x509",
      "-newkey",
      "ec",
      "-pkeyopt",
      "ec_paramgen_curve:prime256v1",
      "-nodes",
      "-days",
      "1",
      "-subj",
      "/CN=127.0.0.1",
      "-addext",
      "subjectAltName=IP:127.0.0.1",
      "-keyout",
      join(dir, "key.pem"),
      "-out",
      join(dir, "ca.crt"),
    ]);
    await mkdir(join(dir, "serviceaccount"));
    await writeFile(join(dir, "serviceaccount", "token"), "token-of-the-test\n");
    await writeFile(join(dir, "serviceaccount", "namespace"), "team-a");
    server = createServer(
      { key: await readFile(join(dir, "key.pem")), cert: await readFile(join(dir, "ca.crt")) },
      (req, res) => {
        requests.push({ url: req.url ?? "", authorization: req.headers.authorization });
        res.setHeader("content-type", "application/json");
        res.end(JSON.stringify({ kind: "EndpointSliceList", items: slices }));
      },
    );
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    port = (server.address() as { port: number }).port;

    const manifests = await renderChart({}, { release: "reports", namespace: "team-a" });
    const pod = manifests.find((m) => m.kind === "Pod") as unknown as {
      spec: { containers: (typeof container)[] };
    };
    container = pod.spec.containers[0] as typeof container;
  });

  afterAll(async () => {
    await new Promise((resolve) => server?.close(resolve));
    await rm(dir, { recursive: true, force: true });
  });

  async function runScript(timeoutSeconds: number) {
    const [node, ...flags] = container.command;
    expect(node).toBe("node");
    const script = (container.args[0] ?? "").replaceAll(SERVICE_ACCOUNT_DIR, join(dir, "serviceaccount"));
    const env = Object.fromEntries(container.env.map((e) => [e.name, e.value]));
    expect(env.NODE_EXTRA_CA_CERTS).toBe(`${SERVICE_ACCOUNT_DIR}/ca.crt`);
    try {
      const { stdout, stderr } = await run(process.execPath, [...flags, script], {
        env: {
          PATH: process.env.PATH,
          ...env,
          // What the kubelet gives every pod: the API server's address, the cluster CA.
          KUBERNETES_SERVICE_HOST: "127.0.0.1",
          KUBERNETES_SERVICE_PORT: String(port),
          NODE_EXTRA_CA_CERTS: join(dir, "ca.crt"),
          TIMEOUT_SECONDS: String(timeoutSeconds),
        },
      });
      return { code: 0, stdout, stderr };
    } catch (error) {
      const { code, stdout, stderr } = error as { code: number; stdout: string; stderr: string };
      return { code, stdout, stderr };
    }
  }

  it("passes on exactly one ready pod, counted once across address families", async () => {
    slices = [
      { endpoints: [endpoint("reports-pglease-7d9-abcde", "10.0.0.7")] },
      { endpoints: [endpoint("reports-pglease-7d9-abcde", "fd00::7")] },
      { endpoints: null },
    ];
    requests.length = 0;
    const result = await runScript(30);
    expect(result.code).toBe(0);
    expect(result.stdout).toContain(
      "PASS: exactly one ready endpoint behind reports-pglease-leader: reports-pglease-7d9-abcde",
    );
    expect(requests).toHaveLength(3);
    expect(requests[0]).toEqual({
      url: "/apis/discovery.k8s.io/v1/namespaces/team-a/endpointslices?labelSelector=kubernetes.io%2Fservice-name%3Dreports-pglease-leader",
      authorization: "Bearer token-of-the-test",
    });
  });

  it("fails on two ready pods, naming them; a pod that is not ready does not count", async () => {
    slices = [
      {
        endpoints: [
          endpoint("reports-pglease-7d9-abcde", "10.0.0.7"),
          endpoint("reports-pglease-7d9-fghij", "10.0.0.8"),
          endpoint("reports-pglease-7d9-klmno", "10.0.0.9", false),
        ],
      },
    ];
    const result = await runScript(3);
    expect(result.code).toBe(1);
    expect(result.stderr).toContain(
      "FAIL: expected exactly one ready endpoint behind reports-pglease-leader, saw 2 [reports-pglease-7d9-abcde, reports-pglease-7d9-fghij]",
    );
  });

  it.each([
    ["a Deployment", {}],
    [
      "a StatefulSet with pod labels of the user's",
      { workload: { kind: "StatefulSet", podLabels: { team: "a" } } },
    ],
  ])("carries no label a selector of the release matches (%s)", async (_, values) => {
    const manifests = await renderChart(values, { release: "reports", namespace: "team-a" });
    const testPod = manifests.find((m) => m.kind === "Pod" && isHelmHook(m)) as unknown as {
      metadata: { labels: Record<string, string> };
    };
    // Every pod selector the release holds: the workload's, the PodDisruptionBudget's, each
    // Service's (the leader Service, the headless one), and the sidecar's peer selector.
    type Selecting = Manifest & {
      spec: {
        selector?: { matchLabels?: Record<string, string> } & Record<string, unknown>;
        template?: { spec: { initContainers?: Env[]; containers: Env[] } };
      };
    };
    type Env = { env?: { name: string; value?: string }[] };
    const selectors: [string, Record<string, string>][] = [];
    for (const m of manifests as Selecting[]) {
      if (isHelmHook(m)) continue;
      const selector = m.spec?.selector;
      if (m.kind === "Service" && selector)
        selectors.push([`Service ${m.metadata.name}`, selector as Record<string, string>]);
      else if (selector?.matchLabels) selectors.push([`${m.kind} ${m.metadata.name}`, selector.matchLabels]);
      const template = m.spec?.template?.spec;
      const peer = [...(template?.initContainers ?? []), ...(template?.containers ?? [])]
        .flatMap((c) => c.env ?? [])
        .find((e) => e.name === "PGLEASE_PEER_SELECTOR")?.value;
      if (peer)
        selectors.push(["the peer selector", Object.fromEntries(peer.split(",").map((p) => p.split("=")))]);
    }
    expect(selectors.map(([what]) => what)).toEqual(
      expect.arrayContaining([
        "the peer selector",
        "PodDisruptionBudget reports-pglease",
        "Service reports-pglease-leader",
      ]),
    );
    for (const [what, selector] of selectors) {
      const matches = Object.entries(selector).every(
        ([key, value]) => testPod.metadata.labels[key] === value,
      );
      expect(matches, `the helm test pod matches ${what} (${JSON.stringify(selector)})`).toBe(false);
    }
  });
});
