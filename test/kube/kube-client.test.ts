// pglease's own Kubernetes client, over HTTP against both API servers: the in-cluster connection
// (CA file, a token file the kubelet rotates, KUBERNETES_SERVICE_HOST/PORT, IPv6 in brackets)
// and kubeconfig files (YAML, relative paths, several files merged, exec plugins), with error
// answers turned into the server's own words.

import { chmod, copyFile, mkdir, mkdtemp, rm, writeFile } from "node:fs/promises";
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { stringify } from "yaml";
import type { Pod } from "../../src/kube/client/api-types.ts";
import { createKubeClient, KubeApiError, type KubeConnection } from "../../src/kube/client/connection.ts";
import { authority, inClusterConnection } from "../../src/kube/client/in-cluster.ts";
import { kubeconfigConnection, kubeconfigTextConnection } from "../../src/kube/client/kubeconfig.ts";
import { onEachKubeServer } from "../support/kube/kube-server-suites.ts";
import type { TestKube } from "../support/kube/kube-servers.ts";

const NAMESPACE = "client";
const POD = "client-0";

interface Exported {
  clusters: [{ cluster: { server: string; "certificate-authority"?: string } }];
  users: [{ user: { token: string } }];
}

let dir: string;
beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), "pglease-kube-client-"));
});
afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

function readPod(connection: KubeConnection): Promise<Pod> {
  const client = createKubeClient(connection);
  return client
    .json<Pod>({
      method: "GET",
      path: `/api/v1/namespaces/${NAMESPACE}/pods/${POD}`,
      signal: AbortSignal.timeout(10_000),
    })
    .finally(() => client.close());
}

describe("in-cluster addresses", () => {
  it("puts an IPv6 KUBERNETES_SERVICE_HOST in brackets, and leaves names and IPv4 alone", async () => {
    expect(authority("fd00:10:96::1", "443")).toBe("[fd00:10:96::1]:443");
    expect(authority("[fd00::1]", "6443")).toBe("[fd00::1]:6443");
    expect(authority("10.96.0.1", "443")).toBe("10.96.0.1:443");
    await writeFile(join(dir, "ca.crt"), "");
    const env = { KUBERNETES_SERVICE_HOST: "fd00:10:96::1", KUBERNETES_SERVICE_PORT: "443" };
    expect(inClusterConnection(env, dir).server.host).toBe("[fd00:10:96::1]");
  });

  it("names what is missing", () => {
    expect(() => inClusterConnection({}, dir)).toThrow(/KUBERNETES_SERVICE_HOST is not set/);
    expect(() => inClusterConnection({ KUBERNETES_SERVICE_HOST: "10.0.0.1" }, join(dir, "nowhere"))).toThrow(
      /cannot read the API server's CA .*nowhere\/ca\.crt/,
    );
  });
});

await onEachKubeServer("kube client suite", (kube) => {
  let server: TestKube;
  let exported: Exported;
  beforeAll(async () => {
    server = await kube.start({ namespace: NAMESPACE });
    await server.seedPod({ metadata: { name: POD, namespace: NAMESPACE } });
    exported = JSON.parse(server.kubeConfig({ namespace: NAMESPACE }).exportConfig()) as Exported;
  });
  afterAll(() => server?.close());

  it("re-reads a rotated token file at each request, and words a refusal as the server does", async () => {
    const tokenFile = join(dir, `${kube.name}-token`);
    await writeFile(tokenFile, "not-a-valid-token");
    const { cluster } = exported.clusters[0];
    const connection = await kubeconfigTextConnection(
      JSON.stringify({
        ...exported,
        users: [{ name: "rotating", user: { tokenFile } }],
        contexts: [{ name: "c", context: { cluster: "real", user: "rotating" } }],
        clusters: [{ name: "real", cluster }],
        "current-context": "c",
      }),
    );
    const refused = await readPod(connection).catch((error: unknown) => error);
    expect(refused).toBeInstanceOf(KubeApiError);
    expect((refused as KubeApiError).status).toBe(401);
    // The kubelet writes the new token in place; the same connection uses it.
    await writeFile(tokenFile, exported.users[0].user.token);
    expect((await readPod(connection)).metadata?.name).toBe(POD);
  });

  // In-cluster needs TLS; the in-process server speaks plain HTTP.
  it.skipIf(kube.name !== "real")(
    "connects in-cluster: the service address, the CA file, the token file",
    async () => {
      const { cluster } = exported.clusters[0];
      const serviceAccount = join(dir, "serviceaccount");
      await mkdir(serviceAccount, { recursive: true });
      await copyFile(cluster["certificate-authority"] as string, join(serviceAccount, "ca.crt"));
      await writeFile(join(serviceAccount, "token"), exported.users[0].user.token);
      const address = new URL(cluster.server);
      const env = { KUBERNETES_SERVICE_HOST: address.hostname, KUBERNETES_SERVICE_PORT: address.port };
      expect((await readPod(inClusterConnection(env, serviceAccount))).metadata?.name).toBe(POD);
    },
  );

  it("reads a YAML kubeconfig merged from two files, paths relative to each file, and an exec plugin", async () => {
    const { cluster } = exported.clusters[0];
    const token = exported.users[0].user.token;
    const ca = cluster["certificate-authority"];
    if (ca) await copyFile(ca, join(dir, `${kube.name}-ca.crt`));
    const plugin = join(dir, `${kube.name}-plugin.sh`);
    await writeFile(
      plugin,
      `#!/bin/sh\necho '{"apiVersion":"client.authentication.k8s.io/v1","kind":"ExecCredential","status":{"token":"${token}"}}'\n`,
    );
    await chmod(plugin, 0o755);
    const first = join(dir, `${kube.name}-first.yaml`);
    const second = join(dir, `${kube.name}-second.yaml`);
    await writeFile(
      first,
      stringify({
        "current-context": "exec",
        contexts: [{ name: "exec", context: { cluster: "api", user: "plugin" } }],
      }),
    );
    await writeFile(
      second,
      stringify({
        "current-context": "ignored: the first file's wins",
        clusters: [
          {
            name: "api",
            cluster: {
              server: cluster.server,
              ...(ca ? { "certificate-authority": `${kube.name}-ca.crt` } : {}),
              "insecure-skip-tls-verify": !ca,
            },
          },
        ],
        users: [
          {
            name: "plugin",
            user: {
              exec: { apiVersion: "client.authentication.k8s.io/v1", command: `./${kube.name}-plugin.sh` },
            },
          },
        ],
      }),
    );
    const connection = await kubeconfigConnection({ KUBECONFIG: `${first}:${second}` });
    expect((await readPod(connection)).metadata?.name).toBe(POD);
  });
});

describe("requests", () => {
  it("keeps a path prefix of the server address (an API server behind a proxy path)", async () => {
    const seen: string[] = [];
    const server = createServer((req, res) => {
      seen.push(req.url ?? "");
      res.setHeader("Content-Type", "application/json");
      res.end("{}");
    });
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    const { port } = server.address() as AddressInfo;
    const client = createKubeClient({
      server: new URL(`http://127.0.0.1:${port}/k8s/clusters/c-1/`),
      tls: { rejectUnauthorized: true },
      authorization: async () => undefined,
    });
    try {
      await client.json({
        method: "GET",
        path: "/api/v1/namespaces/a/pods",
        query: { labelSelector: "x=y" },
        signal: AbortSignal.timeout(5_000),
      });
      expect(seen).toEqual(["/k8s/clusters/c-1/api/v1/namespaces/a/pods?labelSelector=x%3Dy"]);
    } finally {
      client.close();
      server.close();
    }
  });

  it("fails on a 2xx answer that is not JSON without quoting it: a pod's env values may be in it", async () => {
    // A body cut or mangled on its way (a proxy): V8's SyntaxError quotes ten characters either
    // side of where parsing stopped, here the start of an env var's value.
    const server = createServer((_req, res) => {
      res.setHeader("Content-Type", "application/json");
      res.end('{"items":[{"spec":{"containers":[{"env":[{"name":"DB_PASSWORD","value":hunter2s3cret}]}]}}]}');
    });
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    const { port } = server.address() as AddressInfo;
    const client = createKubeClient({
      server: new URL(`http://127.0.0.1:${port}`),
      tls: { rejectUnauthorized: true },
      authorization: async () => undefined,
    });
    try {
      const failed = await client
        .json({ method: "GET", path: "/api/v1/namespaces/a/pods", signal: AbortSignal.timeout(5_000) })
        .then(
          () => undefined,
          (error: Error) => error,
        );
      expect(`${failed?.message} ${String(failed?.cause)}`).not.toContain("hunter2");
      expect(failed?.message).toMatch(/^the answer to GET \/api\/v1\/namespaces\/a\/pods is not JSON/);
    } finally {
      client.close();
      server.close();
    }
  });
});

describe("kubeconfig refusals", () => {
  const base = {
    clusters: [{ name: "c", cluster: { server: "https://127.0.0.1:6443" } }],
    contexts: [{ name: "x", context: { cluster: "c", user: "u" } }],
    "current-context": "x",
  };

  it("names an auth-provider it cannot use, and a missing current-context", async () => {
    const oidc = { ...base, users: [{ name: "u", user: { "auth-provider": { name: "oidc" } } }] };
    await expect(kubeconfigTextConnection(JSON.stringify(oidc))).rejects.toThrow(
      /user "u" uses auth-provider "oidc", which pglease does not support/,
    );
    await expect(
      kubeconfigTextConnection(JSON.stringify({ ...base, "current-context": "" })),
    ).rejects.toThrow(/no current-context/);
  });

  it("names where a kubeconfig is malformed without quoting it: the line may hold its token", async () => {
    const secret = "hunter2s3cret";
    // YAML: the parser's message quotes the offending line, here a token with a colon unquoted.
    const yaml = `users:\n- name: u\n  user:\n    token: abc: ${secret}\n`;
    const yamlError = await kubeconfigTextConnection(yaml).then(
      () => undefined,
      (error: Error) => error,
    );
    expect(yamlError?.message).not.toContain(secret);
    expect(yamlError?.message).toMatch(/KUBECONFIG: kubeconfig is not a kubeconfig: .*line 4, column 12/);
    // JSON: V8's SyntaxError quotes ten characters either side of where parsing stopped.
    const json = `{"users":[{"name":"u","user":{"token":${secret}}}]}`;
    const jsonError = await kubeconfigTextConnection(json).then(
      () => undefined,
      (error: Error) => error,
    );
    expect(jsonError?.message).not.toContain("hunter2");
    expect(jsonError?.message).toMatch(/KUBECONFIG: kubeconfig is not a kubeconfig/);
  });

  it("fails on an exec plugin's output that is not JSON without quoting it: it may be the token", async () => {
    const secret = "eyJhbGciOiJSUzI1NiJ9.hunter2s3cret";
    const plugin = join(dir, "bare-token-plugin.sh");
    await writeFile(plugin, `#!/bin/sh\necho '${secret}'\n`);
    await chmod(plugin, 0o755);
    const connection = await kubeconfigTextConnection(
      JSON.stringify({
        ...base,
        users: [
          { name: "u", user: { exec: { apiVersion: "client.authentication.k8s.io/v1", command: plugin } } },
        ],
      }),
    );
    const failed = await connection.authorization().then(
      () => undefined,
      (error: Error) => error,
    );
    expect(failed?.message).not.toContain("eyJhbGci");
    expect(failed?.message).toMatch(
      /the kubeconfig exec plugin .*bare-token-plugin.sh printed no ExecCredential JSON/,
    );
  });

  it("names an unreadable KUBECONFIG file", async () => {
    await expect(kubeconfigConnection({ KUBECONFIG: join(dir, "absent") })).rejects.toThrow(
      /KUBECONFIG: cannot read .*absent/,
    );
  });
});
