// coordination.k8s.io/v1 Leases, the object client-go's leader election writes: namespaced get,
// create and update (PUT). An update must carry the resourceVersion it read; a stale one is the
// 409 that makes two candidates racing for an expired lease end with one winner.
import { type HandlerRequest, type HandlerResult, json } from "./handler-types.ts";
import { isJsonObject, type JsonObject } from "./patch/json-value.ts";
import { prepareCreateMetadata } from "./pods.ts";
import {
  alreadyExists,
  badRequest,
  conflict,
  type FieldError,
  invalid,
  methodNotAllowed,
  notFound,
  STALE_OBJECT,
} from "./status-errors.ts";
import type { ObjectStore, StoredObject } from "./store.ts";
import { parseJsonBody, withKind } from "./wire-format.ts";

const GROUP = "coordination.k8s.io";
const RESOURCE = "leases";
/** metav1.MicroTime fields of a LeaseSpec: kept, and sent back, with microseconds. */
const MICRO_TIME_FIELDS = ["acquireTime", "renewTime"] as const;

function presentLease(lease: StoredObject): JsonObject {
  return withKind(lease, `${GROUP}/v1`, "Lease");
}

function leaseBody(body: string): JsonObject & { metadata: JsonObject } {
  const parsed = parseJsonBody(body);
  if (!isJsonObject(parsed)) throw badRequest("the body must be a Lease object");
  if (parsed.metadata === undefined) parsed.metadata = {};
  if (!isJsonObject(parsed.metadata)) throw badRequest("metadata must be an object");
  delete parsed.kind;
  delete parsed.apiVersion;
  return parsed as JsonObject & { metadata: JsonObject };
}

/** The fields of a LeaseSpec the real validation checks, with its wording; times rewritten to microseconds. */
function specErrors(lease: JsonObject): FieldError[] {
  if (lease.spec === undefined || lease.spec === null) {
    lease.spec = {};
    return [];
  }
  if (!isJsonObject(lease.spec)) throw badRequest("spec must be an object");
  const spec = lease.spec;
  const errors: FieldError[] = [];
  for (const field of ["leaseDurationSeconds", "leaseTransitions"] as const) {
    const value = spec[field];
    if (value === undefined || value === null) continue;
    const minimum = field === "leaseDurationSeconds" ? 1 : 0;
    if (typeof value !== "number" || !Number.isInteger(value) || value < minimum) {
      errors.push({
        type: "FieldValueInvalid",
        field: `spec.${field}`,
        value: String(value),
        detail: minimum === 1 ? "must be greater than 0" : "must be greater than or equal to 0",
      });
    }
  }
  for (const field of MICRO_TIME_FIELDS) {
    const value = spec[field];
    if (value === undefined || value === null) continue;
    const date = typeof value === "string" ? new Date(value) : new Date(Number.NaN);
    if (Number.isNaN(date.getTime()) || !/^\d{4}-\d{2}-\d{2}T/.test(String(value))) {
      throw badRequest(
        `spec.${field}: parsing time ${JSON.stringify(value)} as "2006-01-02T15:04:05.000000Z07:00": cannot parse`,
      );
    }
    // JavaScript dates carry milliseconds; the three digits below them are always zero here.
    spec[field] = `${date.toISOString().slice(0, 23)}000Z`;
  }
  return errors;
}

function createLease(store: ObjectStore, namespace: string, body: string): HandlerResult {
  const lease = leaseBody(body);
  const errors = [...prepareCreateMetadata(lease.metadata, namespace), ...specErrors(lease)];
  const name = String(lease.metadata.name ?? "");
  if (errors.length > 0) throw invalid("Lease", name, errors);
  if (store.get(RESOURCE, namespace, name)) throw alreadyExists(GROUP, RESOURCE, name);
  return json(201, presentLease(store.create(RESOURCE, lease)));
}

/** PUT: the whole object replaced, if and only if it was read at the current resourceVersion. */
function updateLease(store: ObjectStore, existing: StoredObject, body: string): HandlerResult {
  const lease = leaseBody(body);
  const name = existing.metadata.name;
  if (lease.metadata.name !== undefined && lease.metadata.name !== name) {
    throw badRequest(
      `the name of the object (${String(lease.metadata.name)}) does not match the name on the URL (${name})`,
    );
  }
  const resourceVersion = lease.metadata.resourceVersion;
  if (resourceVersion === undefined || resourceVersion === "") {
    throw invalid("Lease", name, [
      {
        type: "FieldValueInvalid",
        field: "metadata.resourceVersion",
        value: "0x0",
        detail: "must be specified for an update",
      },
    ]);
  }
  if (resourceVersion !== existing.metadata.resourceVersion)
    throw conflict(GROUP, RESOURCE, name, STALE_OBJECT);
  const errors = specErrors(lease);
  if (errors.length > 0) throw invalid("Lease", name, errors);
  // Identity and bookkeeping stay the server's; labels, annotations and spec are the client's.
  const next: StoredObject = {
    ...lease,
    metadata: {
      ...existing.metadata,
      labels: lease.metadata.labels ?? existing.metadata.labels,
      annotations: lease.metadata.annotations ?? existing.metadata.annotations,
    },
  } as StoredObject;
  for (const key of ["labels", "annotations"] as const) {
    if (next.metadata[key] === undefined) delete next.metadata[key];
  }
  return json(200, presentLease(store.update(RESOURCE, next)));
}

/** GET, POST and PUT of namespaced Leases; list, watch, patch and delete are not modelled. */
export function handleLeases(store: ObjectStore, request: HandlerRequest): HandlerResult {
  const { verb, namespace, name } = request.target;
  if (namespace === undefined) throw methodNotAllowed(verb);
  if (verb === "create" && name === undefined) return createLease(store, namespace, request.body);
  if (name === undefined) throw methodNotAllowed(verb);
  const existing = store.get(RESOURCE, namespace, name);
  if (verb === "get") {
    if (!existing) throw notFound(GROUP, RESOURCE, name);
    return json(200, presentLease(existing));
  }
  if (verb === "update") {
    // Leases are not created by an update (AllowCreateOnUpdate is false for them).
    if (!existing) throw notFound(GROUP, RESOURCE, name);
    return updateLease(store, existing, request.body);
  }
  throw methodNotAllowed(verb);
}
