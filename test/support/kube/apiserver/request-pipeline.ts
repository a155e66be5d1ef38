import type { IncomingMessage, ServerResponse } from "node:http";
import { handleSelfAccessReview, isSelfAccessReview } from "./access-review.ts";
import { handleEvents } from "./events.ts";
import { Abandoned, type FaultPlan, type FaultRequest } from "./faults.ts";
import type { HandlerRequest, HandlerResult } from "./handler-types.ts";
import { handleLeases } from "./leases.ts";
import { handlePods } from "./pods.ts";
import { authorize, type normalizeRole } from "./rbac.ts";
import { isWatch, type ResourceRequest, resolveResource } from "./routes.ts";
import { nameFromFieldSelector } from "./selectors.ts";
import {
  ApiError,
  badRequest,
  methodNotAllowed,
  routeNotFound,
  unauthorized,
  WatchErrorEvent,
} from "./status-errors.ts";
import type { ObjectStore } from "./store.ts";
import { sendWatchError, type WatchHub } from "./watch.ts";

export interface RecordedRequest {
  method: string;
  path: string;
  query: Record<string, string>;
  contentType: string | undefined;
  /** 0 while unanswered, and for a request that never was (held, then the connection was reset). */
  status: number;
  /** Date.now() on arrival. */
  at: number;
  /** Date.now() once its status was known (the real server's answer arrived at the proxy); unset before. */
  answeredAt?: number;
  /** The parsed JSON body, the raw text when it is not JSON, undefined when empty. */
  body: unknown;
  /** Set for API resource paths: what RBAC sees. */
  verb?: string;
  group?: string;
  resource?: string;
  subresource?: string;
  namespace?: string;
  name?: string;
}

/** A request as it arrived, before any answer: the log entry both servers' tests read. */
export function recordOf(req: IncomingMessage, url: URL): RecordedRequest {
  return {
    method: req.method ?? "GET",
    path: url.pathname,
    query: Object.fromEntries(url.searchParams),
    contentType: req.headers["content-type"],
    status: 0,
    at: Date.now(),
    body: undefined,
  };
}

export interface PipelineContext {
  store: ObjectStore;
  hub: WatchHub;
  faults: FaultPlan;
  log: RecordedRequest[];
  token: string;
  user: string;
  role: () => ReturnType<typeof normalizeRole> | undefined;
}

/** Paths the default RBAC lets anyone read (system:public-info-viewer). */
const PUBLIC_PATHS = new Set(["/healthz", "/livez", "/readyz", "/version"]);

function readBody(request: IncomingMessage): Promise<string> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    request.on("data", (chunk: Buffer) => chunks.push(chunk));
    request.on("end", () => resolve(Buffer.concat(chunks).toString("utf8")));
    request.on("error", reject);
  });
}

function parsedForLog(body: string): unknown {
  if (body === "") return undefined;
  try {
    return JSON.parse(body);
  } catch {
    return body;
  }
}

function publicPath(path: string): { status: number; body: unknown } {
  if (path === "/version") {
    return {
      status: 200,
      body: { major: "1", minor: "33", gitVersion: "v1.33.0-pglease-test", platform: "linux/amd64" },
    };
  }
  return { status: 200, body: "ok" };
}

function dispatch(store: ObjectStore, request: HandlerRequest): HandlerResult {
  // Ignoring dryRun would persist what the caller meant only to try, so refuse it loudly instead.
  if (request.query.has("dryRun")) throw badRequest("dryRun is not modelled by the test API server");
  if (request.target.resource === "pods") return handlePods(store, request);
  if (request.target.resource === "leases") return handleLeases(store, request);
  return handleEvents(store, request);
}

export function createRequestHandler(
  ctx: PipelineContext,
): (req: IncomingMessage, res: ServerResponse) => void {
  const send = (
    res: ServerResponse,
    record: RecordedRequest,
    status: number,
    body: unknown,
    headers = {},
  ) => {
    record.status = status;
    record.answeredAt = Date.now();
    if (res.destroyed || res.headersSent) return;
    const text = typeof body === "string" ? body : JSON.stringify(body);
    const type = typeof body === "string" ? "text/plain; charset=utf-8" : "application/json";
    res.writeHead(status, { ...headers, "Content-Type": type, "Content-Length": Buffer.byteLength(text) });
    res.end(text);
  };

  const handle = async (req: IncomingMessage, res: ServerResponse, record: RecordedRequest, url: URL) => {
    const body = await readBody(req);
    record.body = parsedForLog(body);
    const method = record.method;
    const resolved = resolveResource(method, url.pathname, url.searchParams);
    if (resolved) {
      const { verb, group, resource, subresource, namespace, name } = resolved;
      Object.assign(record, { verb, group, resource, subresource, namespace, name });
    }
    const faultRequest: FaultRequest = {
      method,
      path: url.pathname,
      query: url.searchParams,
      contentType: record.contentType,
      watch: isWatch(url.searchParams),
    };
    const isPublic = PUBLIC_PATHS.has(url.pathname);
    if (!isPublic && req.headers.authorization !== `Bearer ${ctx.token}`) throw unauthorized();
    const early = await ctx.faults.intercept(faultRequest, "before");
    if (early) throw early;
    if (res.destroyed) return;
    if (isPublic) {
      const answer = publicPath(url.pathname);
      send(res, record, answer.status, answer.body);
      return;
    }
    if (!resolved) throw routeNotFound();
    if (resolved.verb === undefined) throw methodNotAllowed(method);
    const target: ResourceRequest = { ...resolved, verb: resolved.verb };
    const role = ctx.role();
    const handlerRequest: HandlerRequest = {
      target,
      query: url.searchParams,
      contentType: record.contentType,
      body,
    };
    let result: HandlerResult;
    if (isSelfAccessReview(target)) {
      result = handleSelfAccessReview(handlerRequest, role, ctx.user);
    } else {
      const denied =
        role &&
        authorize(role, ctx.user, target, nameFromFieldSelector(url.searchParams.get("fieldSelector")));
      if (denied) throw denied;
      result = dispatch(ctx.store, handlerRequest);
    }
    if (result.kind === "watch") {
      ctx.hub.serve(result.spec, req, res);
      record.status = 200;
      return;
    }
    const late = await ctx.faults.intercept(faultRequest, "after");
    if (late) throw late;
    send(res, record, result.status, result.body);
  };

  return (req, res) => {
    const url = new URL(req.url ?? "/", "http://127.0.0.1");
    const record = recordOf(req, url);
    ctx.log.push(record);
    handle(req, res, record, url).catch((error: unknown) => {
      if (error instanceof Abandoned) {
        res.destroy();
        return;
      }
      if (error instanceof WatchErrorEvent && isWatch(url.searchParams)) {
        record.status = 200;
        record.answeredAt = Date.now();
        sendWatchError(res, error);
        return;
      }
      const apiError =
        error instanceof ApiError
          ? error
          : new ApiError(
              500,
              "InternalError",
              `Internal error occurred: ${(error as Error).message ?? error}`,
            );
      send(res, record, apiError.code, apiError.toStatus(), apiError.headers);
    });
  };
}
