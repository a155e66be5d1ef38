import { deepEqual, isJsonObject } from "./json-value.ts";

/** Raised for an operation that cannot apply; the server answers it with 422 like the real one. */
export class JsonPatchError extends Error {}

interface Operation {
  op: string;
  path: string;
  value?: unknown;
  from?: string;
}

function parsePointer(pointer: string): string[] {
  if (pointer === "") return [];
  if (!pointer.startsWith("/")) throw new JsonPatchError(`invalid JSON pointer ${JSON.stringify(pointer)}`);
  return pointer
    .slice(1)
    .split("/")
    .map((token) => token.replaceAll("~1", "/").replaceAll("~0", "~"));
}

function arrayIndex(token: string, length: number, allowEnd: boolean): number {
  if (allowEnd && token === "-") return length;
  if (!/^(0|[1-9][0-9]*)$/.test(token))
    throw new JsonPatchError(`invalid array index ${JSON.stringify(token)}`);
  const index = Number(token);
  if (index > length || (!allowEnd && index === length)) {
    throw new JsonPatchError(`array index ${index} out of bounds (length ${length})`);
  }
  return index;
}

function parentOf(doc: unknown, tokens: string[], pointer: string): unknown {
  let node = doc;
  for (const token of tokens.slice(0, -1)) {
    if (Array.isArray(node)) node = node[arrayIndex(token, node.length, false)];
    else if (isJsonObject(node) && Object.hasOwn(node, token)) node = node[token];
    else throw new JsonPatchError(`doc is missing path: ${pointer}`);
  }
  return node;
}

function isMissingMember(doc: unknown, pointer: string): boolean {
  const tokens = parsePointer(pointer);
  const last = tokens.at(-1);
  if (last === undefined) return false;
  const parent = parentOf(doc, tokens, pointer);
  return isJsonObject(parent) && !Object.hasOwn(parent, last);
}

function read(doc: unknown, pointer: string): unknown {
  let node = doc;
  for (const token of parsePointer(pointer)) {
    if (Array.isArray(node)) node = node[arrayIndex(token, node.length, false)];
    else if (isJsonObject(node) && Object.hasOwn(node, token)) node = node[token];
    else throw new JsonPatchError(`doc is missing path: ${pointer}`);
  }
  return node;
}

function add(doc: unknown, pointer: string, value: unknown): unknown {
  const tokens = parsePointer(pointer);
  const last = tokens.at(-1);
  if (last === undefined) return value;
  const parent = parentOf(doc, tokens, pointer);
  if (Array.isArray(parent)) parent.splice(arrayIndex(last, parent.length, true), 0, value);
  else if (isJsonObject(parent)) parent[last] = value;
  else throw new JsonPatchError(`doc is missing path: ${pointer}`);
  return doc;
}

function remove(doc: unknown, pointer: string): unknown {
  const tokens = parsePointer(pointer);
  const last = tokens.at(-1);
  if (last === undefined) throw new JsonPatchError("cannot remove the whole document");
  const parent = parentOf(doc, tokens, pointer);
  if (Array.isArray(parent)) parent.splice(arrayIndex(last, parent.length, false), 1);
  else if (isJsonObject(parent) && Object.hasOwn(parent, last)) delete parent[last];
  else throw new JsonPatchError(`Unable to remove nonexistent key: ${last}: missing value`);
  return doc;
}

function toOperation(raw: unknown, index: number): Operation {
  if (!isJsonObject(raw) || typeof raw.op !== "string" || typeof raw.path !== "string") {
    throw new JsonPatchError(`operation ${index} must be an object with string "op" and "path"`);
  }
  const op: Operation = { op: raw.op, path: raw.path };
  if (Object.hasOwn(raw, "value")) op.value = raw.value;
  if (typeof raw.from === "string") op.from = raw.from;
  return op;
}

function requireValue(op: Operation): unknown {
  if (!Object.hasOwn(op, "value"))
    throw new JsonPatchError(`${op.op} operation does not apply: missing value`);
  return structuredClone(op.value);
}

/** RFC 6902 on a deep copy; the input document is never touched, even when an operation fails midway. */
export function applyJsonPatch(document: unknown, operations: unknown): unknown {
  if (!Array.isArray(operations)) throw new JsonPatchError("a JSON patch must be an array of operations");
  let doc = structuredClone(document);
  operations.forEach((raw, i) => {
    const op = toOperation(raw, i);
    switch (op.op) {
      case "add":
        doc = add(doc, op.path, requireValue(op));
        break;
      case "remove":
        doc = remove(doc, op.path);
        break;
      case "replace":
        read(doc, op.path);
        doc = op.path === "" ? requireValue(op) : add(remove(doc, op.path), op.path, requireValue(op));
        break;
      case "test":
        // As the API server's json-patch (v4): a missing member of an existing object tests equal to null.
        if (op.value === null && isMissingMember(doc, op.path)) break;
        if (!deepEqual(read(doc, op.path), op.value)) {
          throw new JsonPatchError(`testing value ${op.path} failed: test failed`);
        }
        break;
      case "move": {
        if (op.from === undefined) throw new JsonPatchError('move operation requires "from"');
        const value = read(doc, op.from);
        doc = add(remove(doc, op.from), op.path, value);
        break;
      }
      case "copy":
        if (op.from === undefined) throw new JsonPatchError('copy operation requires "from"');
        doc = add(doc, op.path, structuredClone(read(doc, op.from)));
        break;
      default:
        throw new JsonPatchError(`Unexpected kind: ${op.op}`);
    }
  });
  return doc;
}
