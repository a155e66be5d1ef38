import { deepEqual, isJsonObject, type JsonObject } from "./json-value.ts";

/**
 * How a list field of a Pod merges, from the `patchStrategy`/`patchMergeKey` tags of core/v1.
 * Paths use `[]` for "every element of the list". Lists not named here are atomic: a patch replaces them.
 */
type ListStrategy = { mergeKey: string } | { primitives: true };

const CONTAINER_LISTS = ["spec.containers", "spec.initContainers", "spec.ephemeralContainers"];

const POD_LIST_STRATEGIES: ReadonlyMap<string, ListStrategy> = new Map<string, ListStrategy>([
  ["metadata.ownerReferences", { mergeKey: "uid" }],
  ["metadata.finalizers", { primitives: true }],
  ...CONTAINER_LISTS.flatMap((list): [string, ListStrategy][] => [
    [list, { mergeKey: "name" }],
    [`${list}[].ports`, { mergeKey: "containerPort" }],
    [`${list}[].env`, { mergeKey: "name" }],
    [`${list}[].volumeMounts`, { mergeKey: "mountPath" }],
    [`${list}[].volumeDevices`, { mergeKey: "devicePath" }],
  ]),
  ["spec.volumes", { mergeKey: "name" }],
  ["spec.imagePullSecrets", { mergeKey: "name" }],
  ["spec.hostAliases", { mergeKey: "ip" }],
  ["status.conditions", { mergeKey: "type" }],
  ["status.podIPs", { mergeKey: "ip" }],
  ["status.hostIPs", { mergeKey: "ip" }],
]);

/** Malformed patches; the real server answers most of these with 400, a missing merge key with 500. */
export class StrategicMergePatchError extends Error {
  readonly code: 400 | 500;
  constructor(message: string, code: 400 | 500 = 400) {
    super(message);
    this.code = code;
  }
}

const SET_ELEMENT_ORDER = "$setElementOrder/";
const DELETE_FROM_PRIMITIVE_LIST = "$deleteFromPrimitiveList/";

function childPath(path: string, key: string): string {
  return path === "" ? key : `${path}.${key}`;
}

function mergeKeyValue(item: unknown, mergeKey: string, path: string): unknown {
  if (!isJsonObject(item) || !Object.hasOwn(item, mergeKey)) {
    throw new StrategicMergePatchError(
      `map: ${JSON.stringify(item)} does not contain declared merge key: ${mergeKey} (in ${path})`,
      500,
    );
  }
  return item[mergeKey];
}

function mergeKeyedList(original: unknown[], patch: unknown[], mergeKey: string, path: string): unknown[] {
  if (patch.some((item) => isJsonObject(item) && item.$patch === "replace")) {
    return patch
      .filter((item) => !(isJsonObject(item) && item.$patch === "replace"))
      .map((item) => mergeMap({}, item, `${path}[]`));
  }
  const result = original.map((item) => structuredClone(item));
  for (const item of patch) {
    const key = mergeKeyValue(item, mergeKey, path);
    const at = result.findIndex((existing) => deepEqual(mergeKeyValue(existing, mergeKey, path), key));
    if (isJsonObject(item) && item.$patch === "delete") {
      if (at >= 0) result.splice(at, 1);
    } else if (at >= 0) {
      result[at] = mergeMap(result[at], item, `${path}[]`);
    } else {
      result.push(mergeMap({}, item, `${path}[]`));
    }
  }
  return result;
}

function mergePrimitiveList(original: unknown[], patch: unknown[]): unknown[] {
  const result = [...original];
  for (const item of patch) if (!result.some((existing) => deepEqual(existing, item))) result.push(item);
  return result;
}

function applyElementOrder(list: unknown[], order: unknown, strategy: ListStrategy | undefined): unknown[] {
  if (!Array.isArray(order)) throw new StrategicMergePatchError("$setElementOrder must carry a list");
  const keyOf = (item: unknown): unknown =>
    strategy && "mergeKey" in strategy && isJsonObject(item) ? item[strategy.mergeKey] : item;
  const orderKeys = order.map((entry) =>
    strategy && "mergeKey" in strategy && isJsonObject(entry) ? entry[strategy.mergeKey] : entry,
  );
  const rank = (item: unknown): number => {
    const at = orderKeys.findIndex((k) => deepEqual(k, keyOf(item)));
    return at < 0 ? orderKeys.length : at;
  };
  return list
    .map((item, position) => ({ item, position }))
    .sort((a, b) => rank(a.item) - rank(b.item) || a.position - b.position)
    .map(({ item }) => item);
}

function mergeList(original: unknown, patch: unknown[], path: string): unknown[] {
  const strategy = POD_LIST_STRATEGIES.get(path);
  const base = Array.isArray(original) ? original : [];
  if (strategy === undefined) return patch.map((item) => stripDirectives(item));
  if ("primitives" in strategy) return mergePrimitiveList(base, patch);
  return mergeKeyedList(base, patch, strategy.mergeKey, path);
}

function stripDirectives(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(stripDirectives);
  if (!isJsonObject(value)) return value;
  const result: JsonObject = {};
  for (const [key, child] of Object.entries(value))
    if (!key.startsWith("$")) result[key] = stripDirectives(child);
  return result;
}

function mergeMap(original: unknown, patch: unknown, path: string): unknown {
  if (!isJsonObject(patch)) return structuredClone(patch);
  if (patch.$patch === "replace") return stripDirectives(patch);
  if (patch.$patch === "delete") return undefined;
  if (patch.$patch !== undefined) {
    throw new StrategicMergePatchError(`Unknown patch type: ${String(patch.$patch)} in map: ${path}`);
  }
  const result: JsonObject = isJsonObject(original) ? structuredClone(original) : {};
  const retainKeys = patch.$retainKeys;
  if (retainKeys !== undefined) {
    if (!Array.isArray(retainKeys)) throw new StrategicMergePatchError("$retainKeys must carry a list");
    for (const existing of Object.keys(result)) if (!retainKeys.includes(existing)) delete result[existing];
  }
  const orders: [string, unknown][] = [];
  for (const [key, value] of Object.entries(patch)) {
    if (key.startsWith(SET_ELEMENT_ORDER)) {
      orders.push([key.slice(SET_ELEMENT_ORDER.length), value]);
    } else if (key.startsWith(DELETE_FROM_PRIMITIVE_LIST)) {
      const field = key.slice(DELETE_FROM_PRIMITIVE_LIST.length);
      if (!Array.isArray(value)) throw new StrategicMergePatchError(`${key} must carry a list`);
      const current = result[field];
      if (Array.isArray(current))
        result[field] = current.filter((item) => !value.some((v) => deepEqual(v, item)));
    } else if (key === "$retainKeys") {
    } else if (value === null) {
      delete result[key];
    } else if (Array.isArray(value)) {
      result[key] = mergeList(result[key], value, childPath(path, key));
    } else {
      const merged = mergeMap(result[key], value, childPath(path, key));
      if (merged === undefined) delete result[key];
      else result[key] = merged;
    }
  }
  for (const [field, order] of orders) {
    const list = result[field];
    if (Array.isArray(list)) {
      result[field] = applyElementOrder(list, order, POD_LIST_STRATEGIES.get(childPath(path, field)));
    }
  }
  return result;
}

/** Strategic merge patch of a Pod, with core/v1's merge keys (conditions merge by `type`). */
export function applyPodStrategicMergePatch(pod: unknown, patch: unknown): unknown {
  if (!isJsonObject(patch))
    throw new StrategicMergePatchError("a strategic merge patch must be a JSON object");
  return mergeMap(pod, patch, "") ?? {};
}
