export type JsonObject = { [key: string]: unknown };

export function isJsonObject(value: unknown): value is JsonObject {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

/** A key holding undefined is absent on the wire, so it is absent for comparison too. */
function definedKeys(object: JsonObject): string[] {
  return Object.keys(object).filter((k) => object[k] !== undefined);
}

/** Equality of JSON values: key order is irrelevant, array order is not. */
export function deepEqual(a: unknown, b: unknown): boolean {
  if (a === b) return true;
  if (Array.isArray(a)) {
    return Array.isArray(b) && a.length === b.length && a.every((item, i) => deepEqual(item, b[i]));
  }
  if (isJsonObject(a) && isJsonObject(b)) {
    const keys = definedKeys(a);
    if (keys.length !== definedKeys(b).length) return false;
    return keys.every((k) => deepEqual(a[k], b[k]));
  }
  return false;
}
