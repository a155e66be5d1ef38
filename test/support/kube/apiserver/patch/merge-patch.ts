import { isJsonObject, type JsonObject } from "./json-value.ts";

/**
 * RFC 7386 JSON merge patch. Arrays are values like any other, so a patch carrying
 * `status.conditions` replaces the whole list: that is what wipes the kubelet's conditions.
 */
export function applyMergePatch(target: unknown, patch: unknown): unknown {
  if (!isJsonObject(patch)) return structuredClone(patch);
  const result: JsonObject = isJsonObject(target) ? { ...target } : {};
  for (const [key, value] of Object.entries(patch)) {
    if (value === null) delete result[key];
    else result[key] = applyMergePatch(result[key], value);
  }
  return result;
}
