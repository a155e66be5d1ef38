import { type HandlerRequest, type HandlerResult, json } from "./handler-types.ts";
import { isJsonObject, type JsonObject } from "./patch/json-value.ts";
import { prepareCreateMetadata } from "./pods.ts";
import { parseFieldSelector, parseLabelSelector } from "./selectors.ts";
import {
  alreadyExists,
  badRequest,
  type FieldError,
  invalid,
  methodNotAllowed,
  notFound,
} from "./status-errors.ts";
import type { ObjectStore, StoredObject } from "./store.ts";
import { normalizeTimes, parseJsonBody, withKind } from "./wire-format.ts";

// Both event APIs are views of one storage, as in the real server: events are kept in core/v1 form
// and renamed on the way in and out of events.k8s.io/v1.

const EVENTS_V1_TO_CORE: readonly [string, string][] = [
  ["regarding", "involvedObject"],
  ["note", "message"],
  ["reportingController", "reportingComponent"],
  ["deprecatedSource", "source"],
  ["deprecatedFirstTimestamp", "firstTimestamp"],
  ["deprecatedLastTimestamp", "lastTimestamp"],
  ["deprecatedCount", "count"],
];

function rename(object: JsonObject, pairs: readonly [string, string][]): JsonObject {
  const result: JsonObject = { ...object };
  for (const [from, to] of pairs) {
    if (Object.hasOwn(result, from)) {
      result[to] = result[from];
      delete result[from];
    }
  }
  return result;
}

export function presentCoreEvent(event: StoredObject): JsonObject {
  return withKind(event, "v1", "Event");
}

export function presentEventsV1(event: StoredObject): JsonObject {
  return withKind(
    rename(
      event,
      EVENTS_V1_TO_CORE.map(([v1, core]) => [core, v1]),
    ),
    "events.k8s.io/v1",
    "Event",
  );
}

function required(field: string): FieldError {
  return { type: "FieldValueRequired", field, detail: "" };
}

function tooLong(field: string, max: number): FieldError {
  return { type: "FieldValueTooLong", field, detail: `may not be more than ${max} bytes` };
}

/** events.k8s.io/v1 insists on the fields a structured event needs; core/v1 only when eventTime is set. */
function structuredEventErrors(event: JsonObject, eventsV1: boolean): FieldError[] {
  const name = (core: string) =>
    eventsV1 ? (EVENTS_V1_TO_CORE.find(([, c]) => c === core)?.[0] ?? core) : core;
  const errors: FieldError[] = [];
  if (!eventsV1 && event.eventTime === undefined) return errors;
  if (event.eventTime === undefined) errors.push(required("eventTime"));
  for (const field of ["reportingComponent", "reportingInstance", "action", "reason"]) {
    const value = event[field];
    if (typeof value !== "string" || value === "") errors.push(required(name(field)));
    else if (field !== "reportingComponent" && value.length > 128) errors.push(tooLong(name(field), 128));
  }
  if (event.type !== "Normal" && event.type !== "Warning") {
    errors.push({
      type: "FieldValueInvalid",
      field: "type",
      value: String(event.type ?? ""),
      detail: "has invalid value, must be one of Normal or Warning",
    });
  }
  if (typeof event.message === "string" && Buffer.byteLength(event.message) > 1024) {
    errors.push(tooLong(name("message"), 1024));
  }
  return errors;
}

function createEvent(store: ObjectStore, namespace: string, body: string, eventsV1: boolean): HandlerResult {
  const parsed = parseJsonBody(body);
  if (!isJsonObject(parsed)) throw badRequest("the body must be an Event object");
  const event = normalizeTimes(eventsV1 ? rename(parsed, EVENTS_V1_TO_CORE) : parsed) as JsonObject;
  delete event.kind;
  delete event.apiVersion;
  if (event.metadata === undefined) event.metadata = {};
  if (!isJsonObject(event.metadata)) throw badRequest("metadata must be an object");
  const metadata = event.metadata;
  const errors = prepareCreateMetadata(metadata, namespace);
  const involved = isJsonObject(event.involvedObject) ? event.involvedObject : {};
  if (involved.namespace !== undefined && involved.namespace !== "" && involved.namespace !== namespace) {
    errors.push({
      type: "FieldValueInvalid",
      field: eventsV1 ? "regarding.namespace" : "involvedObject.namespace",
      value: String(involved.namespace),
      detail: "does not match event.namespace",
    });
  }
  errors.push(...structuredEventErrors(event, eventsV1));
  const name = String(metadata.name ?? "");
  if (errors.length > 0) throw invalid("Event", name, errors);
  if (store.get("events", namespace, name))
    throw alreadyExists(eventsV1 ? "events.k8s.io" : "", "events", name);
  const created = store.create("events", event as JsonObject & { metadata: JsonObject });
  return json(201, eventsV1 ? presentEventsV1(created) : presentCoreEvent(created));
}

/** POST, GET and LIST of core/v1 and events.k8s.io/v1 events; other verbs are not modelled. */
export function handleEvents(store: ObjectStore, request: HandlerRequest): HandlerResult {
  const { target, query, body } = request;
  const eventsV1 = target.group === "events.k8s.io";
  const present = eventsV1 ? presentEventsV1 : presentCoreEvent;
  const { verb, namespace, name } = target;
  if (verb === "watch") return { kind: "watch", spec: { resource: "events", namespace, query, present } };
  if (verb === "list") {
    const labels = parseLabelSelector(query.get("labelSelector"));
    const fields = parseFieldSelector("events", query.get("fieldSelector"));
    const items = store
      .list("events", namespace)
      .filter((e) => labels(e.metadata.labels as Record<string, string> | undefined) && fields(e))
      .map((e) => (eventsV1 ? presentEventsV1(e) : e));
    return json(200, {
      kind: "EventList",
      apiVersion: eventsV1 ? "events.k8s.io/v1" : "v1",
      metadata: { resourceVersion: String(store.resourceVersion) },
      items,
    });
  }
  if (verb === "create" && namespace !== undefined) return createEvent(store, namespace, body, eventsV1);
  if (verb === "get" && namespace !== undefined && name !== undefined) {
    const event = store.get("events", namespace, name);
    if (!event) throw notFound(eventsV1 ? "events.k8s.io" : "", "events", name);
    return json(200, present(event));
  }
  throw methodNotAllowed(verb);
}
