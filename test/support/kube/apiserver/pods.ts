import { randomBytes } from "node:crypto";
import { type HandlerRequest, type HandlerResult, json } from "./handler-types.ts";
import { applyPodPatch } from "./patch/apply-patch.ts";
import { isJsonObject, type JsonObject } from "./patch/json-value.ts";
import { commitPodUpdate, metadataDecodeErrors, metadataFieldErrors } from "./pod-updates.ts";
import { parseFieldSelector, parseLabelSelector } from "./selectors.ts";
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
import { kubeTime, type ObjectStore, type StoredObject } from "./store.ts";
import { nameErrors } from "./validation.ts";
import { normalizeTimes, parseJsonBody, withKind } from "./wire-format.ts";

const GENERATE_NAME_ALPHABET = "bcdfghjklmnpqrstvwxz2456789";

/** apiserver's generateName suffix: five characters that cannot spell words. */
export function generateNameSuffix(): string {
  return [...randomBytes(5)].map((b) => GENERATE_NAME_ALPHABET[b % GENERATE_NAME_ALPHABET.length]).join("");
}

export function podBody(pod: StoredObject): JsonObject {
  return withKind(pod, "v1", "Pod");
}

function requireBodyObject(body: string, kind: string): JsonObject & { metadata: JsonObject } {
  const parsed = parseJsonBody(body);
  if (!isJsonObject(parsed)) throw badRequest(`the body must be a ${kind} object`);
  if (parsed.metadata === undefined) parsed.metadata = {};
  if (!isJsonObject(parsed.metadata)) throw badRequest("metadata must be an object");
  return parsed as JsonObject & { metadata: JsonObject };
}

/** Fills name from generateName and checks the namespace against the URL, as every create does. */
export function prepareCreateMetadata(metadata: JsonObject, namespace: string): FieldError[] {
  if (metadata.namespace !== undefined && metadata.namespace !== "" && metadata.namespace !== namespace) {
    throw badRequest("the namespace of the provided object does not match the namespace sent on the request");
  }
  metadata.namespace = namespace;
  if ((metadata.name === undefined || metadata.name === "") && typeof metadata.generateName === "string") {
    metadata.name = `${metadata.generateName}${generateNameSuffix()}`;
  }
  for (const field of ["uid", "resourceVersion", "creationTimestamp", "deletionTimestamp", "managedFields"]) {
    delete metadata[field];
  }
  const decodeError = metadataDecodeErrors(metadata);
  if (decodeError) throw badRequest(decodeError);
  const errors: FieldError[] = [];
  if (typeof metadata.name !== "string" || metadata.name === "") {
    errors.push({
      type: "FieldValueRequired",
      field: "metadata.name",
      detail: "name or generateName is required",
    });
  } else {
    errors.push(...nameErrors(metadata.name));
  }
  return [...errors, ...metadataFieldErrors(metadata)];
}

function containerErrors(spec: unknown): FieldError[] {
  const containers = isJsonObject(spec) ? spec.containers : undefined;
  if (!Array.isArray(containers) || containers.length === 0) {
    return [{ type: "FieldValueRequired", field: "spec.containers", detail: "" }];
  }
  return containers.flatMap((c, i): FieldError[] => {
    const errors: FieldError[] = [];
    if (!isJsonObject(c) || typeof c.name !== "string" || c.name === "") {
      errors.push({ type: "FieldValueRequired", field: `spec.containers[${i}].name`, detail: "" });
    }
    if (!isJsonObject(c) || typeof c.image !== "string" || c.image === "") {
      errors.push({ type: "FieldValueRequired", field: `spec.containers[${i}].image`, detail: "" });
    }
    return errors;
  });
}

function createPod(store: ObjectStore, namespace: string, body: string): HandlerResult {
  const pod = normalizeTimes(requireBodyObject(body, "Pod")) as JsonObject & { metadata: JsonObject };
  const errors = [...prepareCreateMetadata(pod.metadata, namespace), ...containerErrors(pod.spec)];
  const name = String(pod.metadata.name ?? "");
  if (errors.length > 0) throw invalid("Pod", name, errors);
  if (store.get("pods", namespace, name)) throw alreadyExists("", "pods", name);
  delete pod.kind;
  delete pod.apiVersion;
  // The kubelet owns status: a created pod starts Pending whatever the client sent.
  pod.status = { phase: "Pending" };
  return json(201, podBody(store.create("pods", pod)));
}

function listPods(store: ObjectStore, namespace: string | undefined, query: URLSearchParams): HandlerResult {
  const labels = parseLabelSelector(query.get("labelSelector"));
  const fields = parseFieldSelector("pods", query.get("fieldSelector"));
  const items = store
    .list("pods", namespace)
    .filter((p) => labels(p.metadata.labels as Record<string, string> | undefined) && fields(p));
  return json(200, {
    kind: "PodList",
    apiVersion: "v1",
    metadata: { resourceVersion: String(store.resourceVersion) },
    items,
  });
}

function deletePod(store: ObjectStore, existing: StoredObject, body: string): HandlerResult {
  const options = body.trim() === "" ? {} : parseJsonBody(body);
  const preconditions =
    isJsonObject(options) && isJsonObject(options.preconditions) ? options.preconditions : {};
  const name = existing.metadata.name;
  if (
    preconditions.resourceVersion !== undefined &&
    preconditions.resourceVersion !== existing.metadata.resourceVersion
  ) {
    throw conflict("", "pods", name, STALE_OBJECT);
  }
  if (preconditions.uid !== undefined && preconditions.uid !== existing.metadata.uid) {
    throw conflict(
      "",
      "pods",
      name,
      `Precondition failed: UID in precondition: ${String(preconditions.uid)}, UID in object meta: ${existing.metadata.uid}`,
    );
  }
  const gone = deleteNow(store, existing);
  return json(200, podBody(gone ?? existing));
}

/**
 * A pod's deletion with grace period 0, as the real registry does it (generic Store.Delete: pods
 * always delete gracefully): first an update that marks the pod, deletionTimestamp now and
 * deletionGracePeriodSeconds 0 (a MODIFIED event), then the removal (a DELETED event carrying the
 * mark). A watcher of the pod sees it marked for deletion before it is gone, even on a force delete.
 */
export function deleteNow(store: ObjectStore, existing: StoredObject): StoredObject | undefined {
  const { namespace, name } = existing.metadata;
  if (existing.metadata.deletionTimestamp === undefined) {
    const marked = structuredClone(existing);
    marked.metadata.deletionTimestamp = kubeTime();
    marked.metadata.deletionGracePeriodSeconds = 0;
    // The first mark bumps a generation that is set, as rest.BeforeDelete does.
    const generation = marked.metadata.generation;
    if (typeof generation === "number" && generation > 0) marked.metadata.generation = generation + 1;
    store.update("pods", marked);
  }
  return store.delete("pods", namespace, name);
}

/** core/v1 pods and pods/status. Deletion is immediate (see deleteNow): there is no kubelet here to finish a graceful one. */
export function handlePods(store: ObjectStore, request: HandlerRequest): HandlerResult {
  const { target, query, body } = request;
  const { verb, namespace, name, subresource } = target;
  if (verb === "watch")
    return { kind: "watch", spec: { resource: "pods", namespace, query, present: podBody } };
  if (verb === "list") return listPods(store, namespace, query);
  if (namespace === undefined) throw methodNotAllowed(verb);
  if (verb === "create") return createPod(store, namespace, body);
  if (name === undefined) throw methodNotAllowed(verb);
  const existing = store.get("pods", namespace, name);
  if (!existing) throw notFound("", "pods", name);
  switch (verb) {
    case "get":
      return json(200, podBody(existing));
    case "update":
      return json(200, podBody(commitPodUpdate(store, existing, parseJsonBody(body), subresource, verb)));
    case "patch": {
      const patched = applyPodPatch(request.contentType, existing, body);
      return json(200, podBody(commitPodUpdate(store, existing, patched, subresource, verb)));
    }
    case "delete":
      if (subresource !== undefined) throw methodNotAllowed("DELETE");
      return deletePod(store, existing, body);
    default:
      throw methodNotAllowed(verb);
  }
}
