// The API server as the suites talk to it directly (with the admin client certificate), where
// kubectl would hide what matters: a watch's events each stamped as it arrives, and an Eviction's
// HTTP status (a PodDisruptionBudget refuses with 429, which `kubectl drain` retries).
import { readFile } from "node:fs/promises";
import { request as httpRequest, type IncomingMessage, type RequestOptions } from "node:http";
import { request } from "node:https";
import { API_SERVER } from "./layout.ts";
import { pki } from "./pki.ts";

async function credentials() {
  const [ca, cert, key] = await Promise.all(
    [pki.caCert, pki.cert("admin"), pki.key("admin")].map((f) => readFile(f)),
  );
  return { ca, cert, key };
}

/** An API server and how to be let in: the cluster's with the admin certificate by default. */
export interface ApiEndpoint {
  url: string;
  /** TLS material and headers (a bearer token) for each request. */
  options: RequestOptions & { ca?: Buffer | string; cert?: Buffer; key?: Buffer };
}

export async function clusterEndpoint(): Promise<ApiEndpoint> {
  return { url: API_SERVER, options: await credentials() };
}

const send = (endpoint: ApiEndpoint, path: string, callback: (res: IncomingMessage) => void) =>
  (endpoint.url.startsWith("https:") ? request : httpRequest)(
    `${endpoint.url}${path}`,
    endpoint.options,
    callback,
  );

export interface Watch {
  /**
   * Resolves once every object that existed when the watch was asked for has been handed to
   * onEvent (as ADDED) and the watch of later changes is open.
   */
  started: Promise<void>;
  /** Why the watch ended, or null while it runs. */
  ended(): string | null;
  stop(): void;
}

/** One GET answered with JSON; a status other than 200 fails with the server's message. */
function getJson<T>(server: ApiEndpoint, path: string): Promise<T> {
  return new Promise((resolve, reject) => {
    const req = send(server, path, (res) => {
      let text = "";
      res.setEncoding("utf8");
      res.on("data", (chunk: string) => {
        text += chunk;
      });
      res.on("end", () => {
        if (res.statusCode === 200) resolve(JSON.parse(text) as T);
        else reject(new Error(`GET ${path}: HTTP ${res.statusCode} ${text.slice(0, 300)}`));
      });
    });
    req.on("error", reject);
    req.end();
  });
}

/**
 * What an informer does: a list, its objects handed on as ADDED, then a watch from the list's
 * resourceVersion, newline-delimited JSON events. A bare watch also begins with an ADDED per
 * existing object, but those come over many reads of the socket, after any point a caller could
 * take as "started": a pod labelled leader before a sidecar kill then showed up stamped after it,
 * as a new leader (test/cluster/pod-timeline.test.ts). `path` is a list path with its query.
 */
export async function watch<T>(
  path: string,
  onEvent: (type: string, object: T) => void,
  endpoint?: ApiEndpoint,
): Promise<Watch> {
  const server = endpoint ?? (await clusterEndpoint());
  const list = await getJson<{ metadata: { resourceVersion: string }; items: T[] }>(server, path);
  for (const item of list.items) onEvent("ADDED", item);
  let ended: string | null = null;
  let synced: () => void = () => undefined;
  let failed: (error: Error) => void = () => undefined;
  const started = new Promise<void>((resolve, reject) => {
    synced = resolve;
    failed = reject;
  });
  const separator = path.includes("?") ? "&" : "?";
  const query = `watch=1&resourceVersion=${encodeURIComponent(list.metadata.resourceVersion)}`;
  const req = send(server, `${path}${separator}${query}`, (res) => {
    if (res.statusCode !== 200) failed(new Error(`watch ${path}: HTTP ${res.statusCode}`));
    else synced();
    let buffer = "";
    res.setEncoding("utf8");
    res.on("data", (chunk: string) => {
      buffer += chunk;
      for (let nl = buffer.indexOf("\n"); nl >= 0; nl = buffer.indexOf("\n")) {
        const line = buffer.slice(0, nl);
        buffer = buffer.slice(nl + 1);
        if (!line.trim()) continue;
        const event = JSON.parse(line) as { type: string; object: T };
        // A watch from a resourceVersion the server no longer has ends in an ERROR (410): say so.
        if (event.type === "ERROR") ended = `the API server ended the watch: ${JSON.stringify(event.object)}`;
        else if (event.type !== "BOOKMARK") onEvent(event.type, event.object);
      }
    });
    res.on("end", () => {
      ended ??= "the API server ended the watch";
    });
  });
  req.on("error", (error) => {
    ended = error.message;
    failed(error);
  });
  req.end();
  return { started, ended: () => ended, stop: () => req.destroy() };
}

export interface EvictionAnswer {
  /** 201: evicted (the pod's graceful deletion began); 429: refused by a PodDisruptionBudget. */
  status: number;
  message: string;
}

/** POST pods/NAME/eviction, what `kubectl drain` sends for each pod. */
export async function evict(namespace: string, pod: string): Promise<EvictionAnswer> {
  const tls = await credentials();
  const body = JSON.stringify({
    apiVersion: "policy/v1",
    kind: "Eviction",
    metadata: { name: pod, namespace },
  });
  return new Promise((resolve, reject) => {
    const req = request(
      `${API_SERVER}/api/v1/namespaces/${namespace}/pods/${pod}/eviction`,
      { ...tls, method: "POST", headers: { "content-type": "application/json" } },
      (res: IncomingMessage) => {
        let text = "";
        res.setEncoding("utf8");
        res.on("data", (chunk: string) => {
          text += chunk;
        });
        res.on("end", () => {
          let message = text;
          try {
            message = (JSON.parse(text) as { message?: string }).message ?? text;
          } catch {
            // Not a Status object: keep the text as it came.
          }
          resolve({ status: res.statusCode ?? 0, message });
        });
      },
    );
    req.on("error", reject);
    req.end(body);
  });
}
