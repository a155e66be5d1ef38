// The kube client over TLS: one secure context per client, not one per connection. An https.Agent
// given `ca`/`cert`/`key` hands them to tls.connect, which builds a secure context (an OpenSSL
// SSL_CTX, the CA bundle parsed into its own store) for every socket it opens: the watch, the
// requests beside it, and every reconnect after the server closes an idle connection.
import { execFile } from "node:child_process";
import { mkdtemp, readFile, rm } from "node:fs/promises";
import { createServer, type Server } from "node:https";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import tls from "node:tls";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { createKubeClient } from "../../src/kube/client/connection.ts";

const run = promisify(execFile);

let dir: string;
let server: Server;
let ca: Buffer;

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), "pglease-kube-client-tls-"));
  // Self-signed for 127.0.0.1: the certificate is its own CA.
  await run(
    "openssl",
    [
      "req",
      "-x509",
      "-newkey",
      "ec",
      "-pkeyopt",
      "ec_paramgen_curve:P-256",
      "-nodes",
      "-days",
      "2",
      "-subj",
      "/CN=127.0.0.1",
      "-addext",
      "subjectAltName=IP:127.0.0.1",
      "-keyout",
      "server.key",
      "-out",
      "server.crt",
    ],
    { cwd: dir },
  );
  ca = await readFile(join(dir, "server.crt"));
  const key = await readFile(join(dir, "server.key"));
  // Answers late, so requests sent together each need a connection of their own.
  server = createServer({ key, cert: ca }, (_req, res) => {
    setTimeout(() => res.end('{"kind":"Pod"}'), 50);
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
});

afterAll(async () => {
  server?.closeAllConnections();
  await new Promise((resolve) => server?.close(resolve));
  if (dir) await rm(dir, { recursive: true, force: true });
});

describe("the kube client over TLS", () => {
  it("builds one secure context for all its connections, and verifies the server with it", async () => {
    const contexts = vi.spyOn(tls, "createSecureContext");
    const { port } = server.address() as AddressInfo;
    const client = createKubeClient({
      server: new URL(`https://127.0.0.1:${port}`),
      tls: { ca, rejectUnauthorized: true },
      authorization: async () => undefined,
    });
    try {
      const get = () =>
        client.json<{ kind: string }>({ method: "GET", path: "/", signal: AbortSignal.timeout(10_000) });
      // Three at once open three connections; closing them makes the next three connect anew.
      expect(await Promise.all([get(), get(), get()])).toEqual(Array(3).fill({ kind: "Pod" }));
      server.closeIdleConnections();
      expect(await Promise.all([get(), get(), get()])).toEqual(Array(3).fill({ kind: "Pod" }));
      expect(contexts).toHaveBeenCalledTimes(1);
    } finally {
      client.close();
      contexts.mockRestore();
    }
  });

  it("still refuses a server its CA did not sign", async () => {
    const { port } = server.address() as AddressInfo;
    const client = createKubeClient({
      server: new URL(`https://127.0.0.1:${port}`),
      // Not the server's certificate: Node's bundled roots do not sign it either.
      tls: { ca: tls.rootCertificates[0], rejectUnauthorized: true },
      authorization: async () => undefined,
    });
    try {
      await expect(
        client.json({ method: "GET", path: "/", signal: AbortSignal.timeout(10_000) }),
      ).rejects.toThrow(/self-signed certificate/);
    } finally {
      client.close();
    }
  });
});
