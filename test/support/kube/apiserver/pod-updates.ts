import { deepEqual, isJsonObject, type JsonObject } from "./patch/json-value.ts";
import { badRequest, conflict, type FieldError, invalid, STALE_OBJECT } from "./status-errors.ts";
import type { ObjectStore, StoredObject } from "./store.ts";
import { annotationErrors, labelErrors, qualifiedNameErrors, stringMapDecodeError } from "./validation.ts";
import { normalizeTimes } from "./wire-format.ts";

/** Server-owned metadata that no client write can change. */
const SERVER_OWNED_METADATA = [
  "name",
  "namespace",
  "uid",
  "creationTimestamp",
  "generation",
  "deletionTimestamp",
  "deletionGracePeriodSeconds",
] as const;

const SYSTEM_CONDITIONS = new Set(["PodScheduled", "Ready", "Initialized"]);

/** The real Pod update validation allows only these spec changes; everything else is 422 Forbidden. */
const SPEC_UPDATE_FORBIDDEN =
  "pod updates may not change fields other than `spec.containers[*].image`,`spec.initContainers[*].image`," +
  "`spec.activeDeadlineSeconds`,`spec.tolerations` (only additions to existing tolerations)," +
  "`spec.terminationGracePeriodSeconds` (allow it to be set to 1 if it was previously negative)";

function immutableSpecView(spec: unknown): unknown {
  if (!isJsonObject(spec)) return spec;
  const view = structuredClone(spec);
  for (const list of ["containers", "initContainers"]) {
    const containers = view[list];
    if (Array.isArray(containers)) {
      view[list] = containers.map((c) => (isJsonObject(c) ? { ...c, image: undefined } : c));
    }
  }
  delete view.activeDeadlineSeconds;
  delete view.tolerations;
  delete view.terminationGracePeriodSeconds;
  return JSON.parse(JSON.stringify(view));
}

export function metadataDecodeErrors(metadata: JsonObject): string | undefined {
  return (
    stringMapDecodeError(metadata.labels, "labels") ??
    stringMapDecodeError(metadata.annotations, "annotations")
  );
}

export function metadataFieldErrors(metadata: JsonObject): FieldError[] {
  return [
    ...labelErrors(metadata.labels as Record<string, string> | undefined),
    ...annotationErrors(metadata.annotations as Record<string, string> | undefined),
  ];
}

function conditionErrors(status: unknown): FieldError[] {
  const conditions = isJsonObject(status) ? status.conditions : undefined;
  if (conditions === undefined || conditions === null) return [];
  if (!Array.isArray(conditions))
    throw badRequest(
      "json: cannot unmarshal into Go struct field PodStatus.status.conditions of type []v1.PodCondition",
    );
  return conditions.flatMap((condition, i): FieldError[] => {
    if (!isJsonObject(condition) || typeof condition.type !== "string") {
      throw badRequest(`status.conditions[${i}]: a pod condition needs a string "type"`);
    }
    if (SYSTEM_CONDITIONS.has(condition.type)) return [];
    return qualifiedNameErrors(condition.type).map((detail) => ({
      type: "FieldValueInvalid",
      field: `status.conditions[${i}].Type`,
      value: condition.type as string,
      detail,
    }));
  });
}

/**
 * A PUT's metadata.uid is a precondition of the storage layer (409 Conflict); a PATCH has none, so
 * a patched uid that differs is a change of an immutable field, refused by validation (422): once by
 * the common metadata check and once by the pod's own, so the cause is listed twice, as the real
 * server lists it.
 */
function checkPreconditions(
  existing: StoredObject,
  candidate: JsonObject,
  urlName: string,
  verb: "update" | "patch",
): void {
  const metadata = candidate.metadata as JsonObject;
  if (metadata.name !== undefined && metadata.name !== urlName) {
    throw badRequest(
      `the name of the object (${String(metadata.name)}) does not match the name on the URL (${urlName})`,
    );
  }
  const rv = metadata.resourceVersion;
  if (rv !== undefined && rv !== null && rv !== "" && rv !== existing.metadata.resourceVersion) {
    throw conflict("", "pods", urlName, STALE_OBJECT);
  }
  const uid = metadata.uid;
  if (uid === undefined || uid === null || uid === "" || uid === existing.metadata.uid) return;
  if (verb === "patch") {
    const immutable: FieldError = {
      type: "FieldValueInvalid",
      field: "metadata.uid",
      value: String(uid),
      detail: "field is immutable",
    };
    throw invalid("Pod", urlName, [immutable, immutable]);
  }
  throw conflict(
    "",
    "pods",
    urlName,
    `StorageError: invalid object, Code: 4, Key: /registry/pods/${existing.metadata.namespace}/${urlName}, ResourceVersion: 0, AdditionalErrorMsg: Precondition failed: UID in precondition: ${String(uid)}, UID in object meta: ${existing.metadata.uid}`,
  );
}

/**
 * Commits a PUT or PATCH result. On the pod itself `.status` changes are dropped; on `pods/status`
 * only `.status` changes are kept. A stale resourceVersion in the candidate is a 409, as in the real server.
 */
export function commitPodUpdate(
  store: ObjectStore,
  existing: StoredObject,
  candidateInput: unknown,
  subresource: string | undefined,
  verb: "update" | "patch",
): StoredObject {
  if (!isJsonObject(candidateInput)) throw badRequest("the body must be a Pod object");
  const candidate = normalizeTimes(candidateInput) as JsonObject;
  delete candidate.kind;
  delete candidate.apiVersion;
  if (candidate.metadata === undefined || candidate.metadata === null) candidate.metadata = {};
  if (!isJsonObject(candidate.metadata)) throw badRequest("metadata must be an object");
  const name = existing.metadata.name;
  checkPreconditions(existing, candidate, name, verb);

  let result: StoredObject;
  if (subresource === "status") {
    result = structuredClone(existing);
    if (candidate.status === undefined) delete result.status;
    else result.status = candidate.status;
  } else {
    const metadata = candidate.metadata as JsonObject;
    const decodeError = metadataDecodeErrors(metadata);
    if (decodeError) throw badRequest(decodeError);
    delete metadata.managedFields;
    for (const field of SERVER_OWNED_METADATA) {
      if (existing.metadata[field] === undefined) delete metadata[field];
      else metadata[field] = existing.metadata[field];
    }
    result = { ...candidate, metadata } as StoredObject;
    if (existing.status === undefined) delete result.status;
    else result.status = structuredClone(existing.status);
    if (!deepEqual(immutableSpecView(result.spec), immutableSpecView(existing.spec))) {
      throw invalid("Pod", name, [
        { type: "FieldValueForbidden", field: "spec", detail: SPEC_UPDATE_FORBIDDEN },
      ]);
    }
    if (!deepEqual(result.spec, existing.spec)) {
      result.metadata.generation = Number(existing.metadata.generation ?? 1) + 1;
    }
  }
  const errors = [...metadataFieldErrors(result.metadata), ...conditionErrors(result.status)];
  if (errors.length > 0) throw invalid("Pod", name, errors);
  return store.update("pods", result);
}
