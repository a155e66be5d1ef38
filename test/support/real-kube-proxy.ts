// An HTTPS proxy in front of the real kube-apiserver that gives the tests what the in-process
// server gives them: the request log (what the code under test sent, and what it got), and the
// faults (failures, latency, hung requests before or after the write commits, dropped watches, the
// server going down). Bytes pass through unchanged otherwise, so the answers are the real server's.
import type { IncomingMessage, ServerResponse } from "node:http";
import { Agent, request as httpsRequest } from "node:https";
import type { Socket } from "node:net";
import { Abandoned, FaultPlan, type FaultRequest, matcherFor } from "./kube-apiserver/faults.ts";
import type { FaultControl } from "./kube-apiserver/index.ts";
import { Listener } from "./kube-apiserver/listener.ts";
import type { RecordedRequest } from "./kube-apiserver/request-pipeline.ts";
import { isWatch, resolveResource } from "./kube-apiserver/routes.ts";
import { ApiError } from "./kube-apiserver/status-errors.ts";

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

function sendError(res: ServerResponse, record: RecordedRequest, error: ApiError): void {
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

export async function startKubeProxy(options: ProxyOptions): Promise<KubeProxy> {
  const plan = new FaultPlan();
  const log: RecordedRequest[] = [];
  const watches = new Set<OpenWatch>();
  const waiters = new Set<() => void>();
  const agent = new Agent({ keepAlive: true, ca: options.ca });
  const changed = () => {
    for (const w of [...waiters]) w();
  };

  const forward = (req: IncomingMessage, body: Buffer, abort: AbortSignal): Promise<IncomingMessage> =>
    new Promise((resolve, reject) => {
      const headers = { ...req.headers, host: new URL(options.target).host };
      const upstream = httpsRequest(
        `${options.target}${req.url}`,
        { method: req.method, headers, agent, signal: abort },
        resolve,
      );
      upstream.on("error", reject);
      upstream.end(body);
    });

  const handle = async (req: IncomingMessage, res: ServerResponse, record: RecordedRequest, url: URL) => {
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
    const early = await plan.intercept(fault, "before");
    if (early) throw early;
    if (res.destroyed) return;
    const abort = new AbortController();
    // A client that goes away mid-answer (a watch ended, a timed-out request) ends the upstream too.
    res.on("close", () => {
      if (!res.writableFinished) abort.abort();
    });
    const upstream = await forward(req, body, abort.signal);
    record.status = upstream.statusCode ?? 0;
    if (fault.watch && upstream.statusCode === 200) {
      const watch: OpenWatch = { fault, client: req, response: res, stop: () => abort.abort() };
      watches.add(watch);
      changed();
      res.on("close", () => {
        watches.delete(watch);
        changed();
      });
      res.writeHead(200, upstream.headers);
      res.flushHeaders();
      upstream.pipe(res);
      return;
    }
    const answer = await readBody(upstream);
    const late = await plan.intercept(fault, "after");
    if (late) throw late;
    res.writeHead(upstream.statusCode ?? 502, upstream.headers);
    res.end(answer);
  };

  const listener = new Listener(
    (req, res) => {
      const url = new URL(req.url ?? "/", "https://127.0.0.1");
      const record: RecordedRequest = {
        method: req.method ?? "GET",
        path: url.pathname,
        query: Object.fromEntries(url.searchParams),
        contentType: req.headers["content-type"],
        status: 0,
        at: Date.now(),
        body: undefined,
      };
      log.push(record);
      handle(req, res, record, url).catch((error: unknown) => {
        if (error instanceof ApiError) return sendError(res, record, error);
        // Held then abandoned, or the upstream or the client went away: no answer, as a cut link.
        if (!(error instanceof Abandoned) && !res.destroyed && !res.headersSent) {
          record.status = 502;
        }
        res.destroy();
      });
    },
    { cert: options.cert, key: options.key },
  );
  await listener.listen(0);

  const faults: FaultControl = {
    failNext: (o) => plan.failNext(o),
    setLatency: (o) => plan.setLatency(o),
    hang: (o) => plan.hang(o),
    dropWatches: (o = {}) => {
      const matches = matcherFor(o.match);
      let dropped = 0;
      for (const watch of [...watches]) {
        if (!matches(watch.fault)) continue;
        dropped++;
        watches.delete(watch);
        if ((o.mode ?? "reset") === "end") watch.response.end();
        else rawSocket(watch.client.socket).resetAndDestroy();
        watch.stop();
      }
      changed();
      return dropped;
    },
    goDown: (o = {}) => listener.goDown(o.mode ?? "refuse"),
    comeBack: () => listener.comeBack(),
    clear: () => plan.clear(),
  };

  return {
    url: `https://127.0.0.1:${listener.port}`,
    requests: log,
    get openWatches() {
      return watches.size;
    },
    waitForWatches: (n = 1) =>
      new Promise<void>((resolve) => {
        const check = () => {
          if (watches.size >= n) {
            waiters.delete(check);
            resolve();
          }
        };
        waiters.add(check);
        check();
      }),
    faults,
    close: async () => {
      plan.abandonAll();
      for (const watch of watches) watch.stop();
      await listener.close();
      agent.destroy();
    },
  };
}
