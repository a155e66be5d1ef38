// The API server as the suites talk to it directly (with the admin client certificate), where
// kubectl would hide what matters: a watch's events each stamped as it arrives, and an Eviction's
// HTTP status (a PodDisruptionBudget refuses with 429, which `kubectl drain` retries).
import { readFile } from "node:fs/promises";
import type { IncomingMessage } from "node:http";
import { request } from "node:https";
import { API_SERVER } from "./layout.ts";
import { pki } from "./pki.ts";

async function credentials() {
  const [ca, cert, key] = await Promise.all(
    [pki.caCert, pki.cert("admin"), pki.key("admin")].map((f) => readFile(f)),
  );
  return { ca, cert, key };
}

export interface Watch {
  /** Resolves at the first event (the watch begins with an ADDED for each existing object). */
  started: Promise<void>;
  /** Why the watch ended, or null while it runs. */
  ended(): string | null;
  stop(): void;
}

/**
 * A plain watch over HTTPS, newline-delimited JSON events, as an informer reads them. `path` is a
 * list path with its query (watch=1 is added).
 */
export async function watch<T>(path: string, onEvent: (type: string, object: T) => void): Promise<Watch> {
  const tls = await credentials();
  let ended: string | null = null;
  let synced: () => void = () => undefined;
  let failed: (error: Error) => void = () => undefined;
  const started = new Promise<void>((resolve, reject) => {
    synced = resolve;
    failed = reject;
  });
  const separator = path.includes("?") ? "&" : "?";
  const req = request(`${API_SERVER}${path}${separator}watch=1`, tls, (res) => {
    if (res.statusCode !== 200) failed(new Error(`watch ${path}: HTTP ${res.statusCode}`));
    let buffer = "";
    res.setEncoding("utf8");
    res.on("data", (chunk: string) => {
      buffer += chunk;
      for (let nl = buffer.indexOf("\n"); nl >= 0; nl = buffer.indexOf("\n")) {
        const line = buffer.slice(0, nl);
        buffer = buffer.slice(nl + 1);
        if (line.trim()) {
          const event = JSON.parse(line) as { type: string; object: T };
          onEvent(event.type, event.object);
          synced();
        }
      }
    });
    res.on("end", () => {
      ended = "the API server ended the watch";
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
