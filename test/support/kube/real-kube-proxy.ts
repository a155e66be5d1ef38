// An HTTPS proxy in front of the real kube-apiserver that gives the tests what the in-process
// server gives them: the request log (what the code under test sent, and what it got), and the
// faults (failures, latency, hung requests before or after the write commits, dropped watches, the
// server going down). Bytes pass through unchanged otherwise, so the answers are the real server's.
import type { IncomingMessage, ServerResponse } from "node:http";
import { Agent, request as httpsRequest } from "node:https";
import type { Socket } from "node:net";
import { Abandoned, FaultPlan, type FaultRequest, matcherFor } from "./apiserver/faults.ts";
import type { FaultControl } from "./apiserver/index.ts";
import { Listener } from "./apiserver/listener.ts";
import { type RecordedRequest, recordOf } from "./apiserver/request-pipeline.ts";
import { isWatch, resolveResource } from "./apiserver/routes.ts";
import { ApiError, WatchErrorEvent } from "./apiserver/status-errors.ts";
import { type DropMode, sendWatchError } from "./apiserver/watch.ts";

export interface KubeProxy {
  /** https://127.0.0.1:PORT, serving the API server's own certificate (valid for 127.0.0.1). */
  url: string;
  requests: RecordedRequest[];
  readonly openWatches: number;
  waitForWatches(n?: number): Promise<void>;
  faults: FaultControl;
  close(): Promise<void>;
}

export interface ProxyOptions {
  /** The real server, e.g. https://127.0.0.1:6443. */
  target: string;
  ca: Buffer;
  cert: Buffer;
  key: Buffer;
}

interface OpenWatch {
  fault: FaultRequest;
  client: IncomingMessage;
  response: ServerResponse;
  stop(): void;
}

/** The watches streaming through the proxy, for waitForWatches and dropWatches. */
class OpenWatches {
  readonly #open = new Set<OpenWatch>();
  readonly #waiters = new Set<() => void>();

  get size(): number {
    return this.#open.size;
  }

  add(watch: OpenWatch): void {
    this.#open.add(watch);
    this.#changed();
    watch.response.on("close", () => {
      this.#open.delete(watch);
      this.#changed();
    });
  }

  waitFor(n: number): Promise<void> {
    return new Promise<void>((resolve) => {
      const check = () => {
        if (this.#open.size >= n) {
          this.#waiters.delete(check);
          resolve();
        }
      };
      this.#waiters.add(check);
      check();
    });
  }

  /** "reset" kills the client's TCP connection (a crash or a cut), "end" ends the stream cleanly. */
  drop(matches: (request: FaultRequest) => boolean, mode: DropMode): number {
    let dropped = 0;
    for (const watch of [...this.#open]) {
      if (!matches(watch.fault)) continue;
      dropped++;
      this.#open.delete(watch);
      if (mode === "end") watch.response.end();
      else rawSocket(watch.client.socket).resetAndDestroy();
      watch.stop();
    }
    this.#changed();
    return dropped;
  }

  stopAll(): void {
    for (const watch of this.#open) watch.stop();
  }

  #changed(): void {
    for (const waiter of [...this.#waiters]) waiter();
  }
}

function readBody(request: IncomingMessage): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    request.on("data", (chunk: Buffer) => chunks.push(chunk));
    request.on("end", () => resolve(Buffer.concat(chunks)));
    request.on("error", reject);
  });
}

function forLog(body: Buffer): unknown {
  if (body.length === 0) return undefined;
  const text = body.toString("utf8");
  try {
    return JSON.parse(text);
  } catch {
    return text;
  }
}

/**
 * The TCP socket under a TLS one: only it can be reset (RST); the TLS socket's handle refuses.
 * Node keeps no public link from the one to the other, only `_parent`.
 */
function rawSocket(socket: Socket): Socket {
  return (socket as Socket & { _parent?: Socket })._parent ?? socket;
}

function sendError(res: ServerResponse, record: RecordedRequest, error: ApiError, watch: boolean): void {
  if (error instanceof WatchErrorEvent && watch) {
    record.status = 200;
    sendWatchError(res, error);
    return;
  }
  record.status = error.code;
  if (res.destroyed || res.headersSent) return;
  const text = JSON.stringify(error.toStatus());
  res.writeHead(error.code, {
    ...error.headers,
    "Content-Type": "application/json",
    "Content-Length": Buffer.byteLength(text),
  });
  res.end(text);
}

interface Forwarding {
  target: string;
  agent: Agent;
  plan: FaultPlan;
  watches: OpenWatches;
}

function forward(
  to: Forwarding,
  req: IncomingMessage,
  body: Buffer,
  abort: AbortSignal,
): Promise<IncomingMessage> {
  return new Promise((resolve, reject) => {
    const headers = { ...req.headers, host: new URL(to.target).host };
    const upstream = httpsRequest(
      `${to.target}${req.url}`,
      { method: req.method, headers, agent: to.agent, signal: abort },
      resolve,
    );
    upstream.on("error", reject);
    upstream.end(body);
  });
}

/** Records the request, applies the faults before and after, and passes it on (a watch as a stream). */
async function handle(
  to: Forwarding,
  req: IncomingMessage,
  res: ServerResponse,
  record: RecordedRequest,
  url: URL,
): Promise<void> {
  const body = await readBody(req);
  record.body = forLog(body);
  const resolved = resolveResource(record.method, url.pathname, url.searchParams);
  if (resolved) {
    const { verb, group, resource, subresource, namespace, name } = resolved;
    Object.assign(record, { verb, group, resource, subresource, namespace, name });
  }
  const fault: FaultRequest = {
    method: record.method,
    path: url.pathname,
    query: url.searchParams,
    contentType: record.contentType,
    watch: isWatch(url.searchParams),
  };
  const early = await to.plan.intercept(fault, "before");
  if (early) throw early;
  if (res.destroyed) return;
  const abort = new AbortController();
  // A client that goes away mid-answer (a watch ended, a timed-out request) ends the upstream too.
  res.on("close", () => {
    if (!res.writableFinished) abort.abort();
  });
  const upstream = await forward(to, req, body, abort.signal);
  record.status = upstream.statusCode ?? 0;
  record.answeredAt = Date.now();
  if (fault.watch && upstream.statusCode === 200) {
    to.watches.add({ fault, client: req, response: res, stop: () => abort.abort() });
    res.writeHead(200, upstream.headers);
    res.flushHeaders();
    upstream.pipe(res);
    return;
  }
  const answer = await readBody(upstream);
  const late = await to.plan.intercept(fault, "after");
  if (late) throw late;
  res.writeHead(upstream.statusCode ?? 502, upstream.headers);
  res.end(answer);
}

function handler(to: Forwarding, log: RecordedRequest[]) {
  return (req: IncomingMessage, res: ServerResponse) => {
    const url = new URL(req.url ?? "/", "https://127.0.0.1");
    const record = recordOf(req, url);
    log.push(record);
    handle(to, req, res, record, url).catch((error: unknown) => {
      if (error instanceof ApiError) return sendError(res, record, error, isWatch(url.searchParams));
      // Held then abandoned, or the client went away: no answer, as over a cut link.
      if (!(error instanceof Abandoned) && !res.destroyed && !res.headersSent) record.status = 502;
      res.destroy();
    });
  };
}

export async function startKubeProxy(options: ProxyOptions): Promise<KubeProxy> {
  const to: Forwarding = {
    target: options.target,
    agent: new Agent({ keepAlive: true, ca: options.ca }),
    plan: new FaultPlan(),
    watches: new OpenWatches(),
  };
  const log: RecordedRequest[] = [];
  const listener = new Listener(handler(to, log), { cert: options.cert, key: options.key });
  await listener.listen(0);
  const { plan, watches } = to;
  return {
    url: `https://127.0.0.1:${listener.port}`,
    requests: log,
    get openWatches() {
      return watches.size;
    },
    waitForWatches: (n = 1) => watches.waitFor(n),
    faults: {
      failNext: (o) => plan.failNext(o),
      setLatency: (o) => plan.setLatency(o),
      hang: (o) => plan.hang(o),
      dropWatches: (o = {}) => watches.drop(matcherFor(o.match), o.mode ?? "reset"),
      goDown: (o = {}) => listener.goDown(o.mode ?? "refuse"),
      comeBack: () => listener.comeBack(),
      clear: () => plan.clear(),
    },
    close: async () => {
      plan.abandonAll();
      watches.stopAll();
      await listener.close();
      to.agent.destroy();
    },
  };
}
