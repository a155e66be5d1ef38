// pglease's own Kubernetes client: plain HTTPS requests with node:https, because the generated
// client (@kubernetes/client-node) loads every API model at import and cost the sidecar ~80 MB
// for the six calls it makes. A connection says where the API server is, how to trust it and how
// to authenticate; requests answer parsed JSON, and error answers become KubeApiError with the
// server's Status.
import type { ClientRequest, IncomingMessage, RequestOptions } from "node:http";
import type { ConnectionOptions } from "node:tls";
import { hideCredentials } from "../../shared/hide-credentials.ts";
import type { Status } from "./api-types.ts";

const { Agent: HttpAgent, request: httpRequest } = process.getBuiltinModule("node:http");
const { Agent: HttpsAgent, request: httpsRequest } = process.getBuiltinModule("node:https");
const tls = process.getBuiltinModule("node:tls");

export interface KubeConnection {
  /** The API server, e.g. https://10.96.0.1:443 (http: only for a local test server). */
  server: URL;
  tls: {
    ca?: Buffer | string;
    cert?: Buffer | string;
    key?: Buffer | string;
    /** false only with a kubeconfig's insecure-skip-tls-verify. */
    rejectUnauthorized: boolean;
    servername?: string;
  };
  /** The Authorization header, asked for before each request: the kubelet rotates in-cluster tokens. */
  authorization(): Promise<string | undefined>;
}

/**
 * An answer outside 2xx, with the Status the server sent (when it sent one). Its message hides
 * credentials the server's words quote, before a body that is not a Status is cut to 200
 * characters (cut first, a URL cut before its @ would leave user:password unrecognised).
 */
export class KubeApiError extends Error {
  readonly status: number;
  readonly body: Status | undefined;

  constructor(status: number, body: Status | undefined, text: string) {
    const said = body?.message ? hideCredentials(body.message) : hideCredentials(text).slice(0, 200);
    super(`HTTP ${status}${said ? ` ${said}` : ""}`);
    this.name = "KubeApiError";
    this.status = status;
    this.body = body;
  }
}

export interface KubeRequest {
  method: "GET" | "POST" | "PATCH";
  path: string;
  query?: Record<string, string>;
  body?: unknown;
  /** The patch type for PATCH; application/json otherwise. */
  contentType?: string;
  signal: AbortSignal;
}

export interface KubeClient {
  /** Sends a request and parses the JSON answer; rejects with KubeApiError, the signal's reason, or a network error. */
  json<T>(request: KubeRequest): Promise<T>;
  /** Opens a streaming request (a watch); the answer is already known to be 2xx. */
  stream(request: KubeRequest): Promise<IncomingMessage>;
  /** Closes the kept-alive connections. */
  close(): void;
}

export function createKubeClient(connection: KubeConnection): KubeClient {
  const secure = connection.server.protocol === "https:";
  // Keep-alive: a quiet pod's few requests reuse one connection; TCP keep-alive probes also tell
  // a watch whose peer vanished from one that is merely quiet.
  const { ca, cert, key, ...verify } = connection.tls;
  const agent = secure ? new HttpsAgent({ keepAlive: true, ...verify }) : new HttpAgent({ keepAlive: true });
  // One secure context for every connection: given ca/cert/key, tls.connect builds one (the CA
  // bundle parsed into a store of its own) for each socket, the watch's, those beside it and every
  // reconnect's. Built at the first request, so a bad cert or key fails each request as before.
  let context: ReturnType<typeof tls.createSecureContext> | undefined;
  const secureContext = () => {
    context ??= tls.createSecureContext({ ca, cert, key });
    return context;
  };
  const send: (url: URL, options: RequestOptions, answered: (res: IncomingMessage) => void) => ClientRequest =
    secure
      ? (url, options, answered) => {
          // tls.connect's option, which the agent hands it with the request's own.
          const secured: RequestOptions & Pick<ConnectionOptions, "secureContext"> = {
            ...options,
            secureContext: secureContext(),
          };
          return httpsRequest(url, secured, answered);
        }
      : httpRequest;

  async function open(req: KubeRequest): Promise<IncomingMessage> {
    req.signal.throwIfAborted();
    // Appended, not resolved: a server behind a path prefix (a Rancher-style proxy) keeps it.
    const url = new URL(`${connection.server.href.replace(/\/+$/, "")}${req.path}`);
    for (const [key, value] of Object.entries(req.query ?? {})) url.searchParams.set(key, value);
    const authorization = await connection.authorization();
    const payload = req.body === undefined ? undefined : JSON.stringify(req.body);
    const headers: Record<string, string> = { Accept: "application/json", "User-Agent": "pglease" };
    if (authorization) headers.Authorization = authorization;
    if (payload !== undefined) {
      headers["Content-Type"] = req.contentType ?? "application/json";
      headers["Content-Length"] = String(Buffer.byteLength(payload));
    }
    return new Promise((resolve, reject) => {
      const outgoing = send(url, { method: req.method, headers, agent, signal: req.signal }, resolve);
      outgoing.on("error", (error) => reject(req.signal.aborted ? req.signal.reason : error));
      outgoing.end(payload);
    });
  }

  async function checked(req: KubeRequest): Promise<IncomingMessage> {
    const response = await open(req);
    const status = response.statusCode ?? 0;
    if (status >= 200 && status < 300) return response;
    const text = await readText(response, req.signal);
    throw new KubeApiError(status, parseStatus(text), text);
  }

  return {
    async json<T>(req: KubeRequest): Promise<T> {
      const text = await readText(await checked(req), req.signal);
      return parseJson<T>(text, `the answer to ${req.method} ${req.path} is not JSON`);
    },
    stream: checked,
    close: () => agent.destroy(),
  };
}

/**
 * JSON from the API server or an exec plugin. V8's SyntaxError quotes the text around where parsing
 * stopped, and that text may be a pod's env values or a token: text that is not JSON fails naming
 * what it was, never quoting it.
 */
export function parseJson<T>(text: string, notJson: string): T {
  try {
    return JSON.parse(text) as T;
  } catch {
    throw new Error(`${notJson} (${text.length} characters, not quoted: they may hold credentials)`);
  }
}

function readText(response: IncomingMessage, signal: AbortSignal): Promise<string> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    response.on("data", (chunk: Buffer) => chunks.push(chunk));
    response.on("end", () => resolve(Buffer.concat(chunks).toString("utf8")));
    response.on("error", (error) => reject(signal.aborted ? signal.reason : error));
    response.on("close", () => {
      if (!response.complete)
        reject(signal.aborted ? signal.reason : new Error("connection closed mid-answer"));
    });
  });
}

function parseStatus(text: string): Status | undefined {
  try {
    const parsed = JSON.parse(text) as Status;
    return typeof parsed === "object" && parsed !== null ? parsed : undefined;
  } catch {
    return undefined;
  }
}
