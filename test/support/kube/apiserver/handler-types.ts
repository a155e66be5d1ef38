import type { JsonObject } from "./patch/json-value.ts";
import type { ResourceRequest } from "./routes.ts";
import type { StoredObject } from "./store.ts";

export interface HandlerRequest {
  target: ResourceRequest;
  query: URLSearchParams;
  contentType: string | undefined;
  body: string;
}

export interface WatchSpec {
  /** Storage resource, which is also the field-selector vocabulary. */
  resource: string;
  namespace: string | undefined;
  query: URLSearchParams;
  /** Turns a stored object into what this API version sends (kind, apiVersion, field names). */
  present: (object: StoredObject) => JsonObject;
}

export type HandlerResult =
  | { kind: "json"; status: number; body: unknown }
  | { kind: "watch"; spec: WatchSpec };

export function json(status: number, body: unknown): HandlerResult {
  return { kind: "json", status, body };
}
