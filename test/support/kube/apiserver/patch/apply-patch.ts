import { ApiError, badRequest, unprocessable, unsupportedMediaType } from "../status-errors.ts";
import { applyJsonPatch, JsonPatchError } from "./json-patch.ts";
import { applyMergePatch } from "./merge-patch.ts";
import { applyPodStrategicMergePatch, StrategicMergePatchError } from "./strategic-merge-patch.ts";

export const JSON_PATCH = "application/json-patch+json";
export const MERGE_PATCH = "application/merge-patch+json";
export const STRATEGIC_MERGE_PATCH = "application/strategic-merge-patch+json";
export const APPLY_PATCH_YAML = "application/apply-patch+yaml";

const ACCEPTED =
  "application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml, " +
  "application/strategic-merge-patch+json, application/apply-patch+cbor";

/** The media type without parameters (`; charset=utf-8`), lower-cased, as the server negotiates it. */
export function mediaType(contentType: string | undefined): string | undefined {
  const type = contentType?.split(";")[0]?.trim().toLowerCase();
  return type === "" ? undefined : type;
}

function parseBody(body: string): unknown {
  try {
    return JSON.parse(body);
  } catch (error) {
    throw badRequest(`error decoding patch: ${(error as Error).message}`);
  }
}

/**
 * Applies a PATCH body to a copy of a Pod the way kube-apiserver picks the semantics: by Content-Type.
 * Only Pods are patchable here, so the strategic merge keys are the Pod's.
 */
export function applyPodPatch(contentType: string | undefined, current: unknown, body: string): unknown {
  const type = mediaType(contentType);
  if (type === APPLY_PATCH_YAML || type === "application/apply-patch+cbor") {
    throw unsupportedMediaType(
      `server-side apply (${type}) is not modelled by this test server: pglease never uses it; ` +
        `send ${MERGE_PATCH}, ${STRATEGIC_MERGE_PATCH} or ${JSON_PATCH}`,
    );
  }
  if (type === JSON_PATCH) {
    try {
      return applyJsonPatch(current, parseBody(body));
    } catch (error) {
      if (error instanceof JsonPatchError) throw unprocessable(error.message);
      throw error;
    }
  }
  if (type === MERGE_PATCH) {
    const patch = parseBody(body);
    if (typeof patch !== "object" || patch === null || Array.isArray(patch)) {
      throw badRequest("a JSON merge patch must be a JSON object");
    }
    return applyMergePatch(current, patch);
  }
  if (type === STRATEGIC_MERGE_PATCH) {
    try {
      return applyPodStrategicMergePatch(current, parseBody(body));
    } catch (error) {
      if (!(error instanceof StrategicMergePatchError)) throw error;
      if (error.code === 500)
        throw new ApiError(500, "InternalError", `Internal error occurred: ${error.message}`);
      throw badRequest(error.message);
    }
  }
  throw unsupportedMediaType(
    `the body of the request was in an unknown format - accepted media types include: ${ACCEPTED}`,
  );
}
