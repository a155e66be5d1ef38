// The connection a pod's service account gives: the API server from the variables the kubelet
// injects, its CA and token from the mounted service account directory.
import { join } from "node:path";
import type { KubeConnection } from "./connection.ts";

const { readFile: readFileCallback, readFileSync } = process.getBuiltinModule("node:fs");
// Not node:fs/promises, which loads readline and the file watchers (fence/downward-api.ts says why).
const readFile = process.getBuiltinModule("node:util").promisify(readFileCallback);

export const SERVICE_ACCOUNT_DIR = "/var/run/secrets/kubernetes.io/serviceaccount";

/** host:port as a URL authority; an IPv6 address (as KUBERNETES_SERVICE_HOST gives it) needs brackets. */
export function authority(host: string, port: string): string {
  const bracketed = host.includes(":") && !host.startsWith("[") ? `[${host}]` : host;
  return `${bracketed}:${port}`;
}

export function inClusterConnection(
  env: NodeJS.ProcessEnv = process.env,
  dir: string = SERVICE_ACCOUNT_DIR,
): KubeConnection {
  const host = env.KUBERNETES_SERVICE_HOST?.trim();
  if (!host) throw new Error("in-cluster configuration: KUBERNETES_SERVICE_HOST is not set");
  const port = env.KUBERNETES_SERVICE_PORT?.trim() || "443";
  const caFile = join(dir, "ca.crt");
  let ca: Buffer;
  try {
    ca = readFileSync(caFile);
  } catch (error) {
    throw new Error(
      `in-cluster configuration: cannot read the API server's CA ${caFile}: ${(error as Error).message}`,
    );
  }
  return {
    server: new URL(`https://${authority(host, port)}`),
    tls: { ca, rejectUnauthorized: true },
    authorization: bearerFromFile(join(dir, "token")),
  };
}

/** Reads the token file at each request: a projected token is rotated on disk by the kubelet. */
export function bearerFromFile(file: string): () => Promise<string> {
  return async () => {
    try {
      return `Bearer ${(await readFile(file, "utf8")).trim()}`;
    } catch (error) {
      throw new Error(`cannot read the service account token ${file}: ${(error as Error).message}`);
    }
  };
}
