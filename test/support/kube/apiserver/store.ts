import { randomUUID } from "node:crypto";
import { deepEqual, isJsonObject, type JsonObject } from "./patch/json-value.ts";

/** Objects exactly as they travel on the wire (timestamps are strings), keyed by resource. */
export interface StoredObject extends JsonObject {
  metadata: JsonObject & { name: string; namespace: string; resourceVersion: string; uid: string };
}

export type WatchEventType = "ADDED" | "MODIFIED" | "DELETED";

export interface StoreChange {
  type: WatchEventType;
  resource: string;
  object: StoredObject;
  /** The object before the change; a watch with a selector needs both sides to emit ADDED/DELETED on moves. */
  previous: StoredObject | undefined;
  resourceVersion: number;
}

/** How many changes a watch can resume from by default; older resourceVersions get 410, as after etcd compaction. */
export const DEFAULT_WATCH_HISTORY = 1000;

/** metav1.Time: RFC 3339 in seconds, no fraction. */
export function kubeTime(date = new Date()): string {
  return `${date.toISOString().slice(0, 19)}Z`;
}

/** A copy that holds only what JSON can carry, so stored state is exactly what the wire would show. */
function wireCopy<T>(value: T): T {
  return JSON.parse(JSON.stringify(value)) as T;
}

function key(namespace: string, name: string): string {
  return `${namespace}/${name}`;
}

/**
 * The etcd of the test server: one global resourceVersion counter bumped by every write, and a
 * bounded history of changes so watches can start from a resourceVersion.
 */
export class ObjectStore {
  #resourceVersion = 1000;
  readonly #objects = new Map<string, Map<string, StoredObject>>();
  readonly #history: StoreChange[] = [];
  readonly #listeners = new Set<(change: StoreChange) => void>();
  readonly #historyLimit: number;

  constructor(historyLimit = DEFAULT_WATCH_HISTORY) {
    if (!Number.isInteger(historyLimit) || historyLimit < 1) {
      throw new Error(`watchHistory must be a positive integer, got ${historyLimit}`);
    }
    this.#historyLimit = historyLimit;
  }

  get resourceVersion(): number {
    return this.#resourceVersion;
  }

  #table(resource: string): Map<string, StoredObject> {
    let table = this.#objects.get(resource);
    if (!table) {
      table = new Map();
      this.#objects.set(resource, table);
    }
    return table;
  }

  get(resource: string, namespace: string, name: string): StoredObject | undefined {
    const found = this.#table(resource).get(key(namespace, name));
    return found && structuredClone(found);
  }

  /** Every object of a resource, in one namespace or all of them, sorted by namespace then name. */
  list(resource: string, namespace?: string): StoredObject[] {
    return [...this.#table(resource).values()]
      .filter((o) => namespace === undefined || o.metadata.namespace === namespace)
      .sort((a, b) =>
        key(a.metadata.namespace, a.metadata.name).localeCompare(key(b.metadata.namespace, b.metadata.name)),
      )
      .map((o) => structuredClone(o));
  }

  /** Fills uid, resourceVersion, creationTimestamp and generation the way the server does on create. */
  create(resource: string, object: JsonObject & { metadata: JsonObject }): StoredObject {
    const metadata = object.metadata;
    const stored = wireCopy(object) as StoredObject;
    stored.metadata = {
      ...wireCopy(metadata),
      name: String(metadata.name),
      namespace: String(metadata.namespace),
      uid: randomUUID(),
      resourceVersion: String(++this.#resourceVersion),
      creationTimestamp: kubeTime(),
      generation: 1,
    };
    this.#table(resource).set(key(stored.metadata.namespace, stored.metadata.name), stored);
    this.#record("ADDED", resource, stored, undefined);
    return structuredClone(stored);
  }

  /**
   * Stores `next` in place of the current object. A write that changes nothing is not a write:
   * the real server returns the object untouched, bumps nothing and emits no watch event.
   */
  update(resource: string, next: StoredObject): StoredObject {
    const table = this.#table(resource);
    const k = key(next.metadata.namespace, next.metadata.name);
    const previous = table.get(k);
    if (!previous) throw new Error(`update of missing ${resource} ${k}`);
    const candidate = wireCopy(next);
    candidate.metadata.resourceVersion = previous.metadata.resourceVersion;
    if (deepEqual(candidate, previous)) return structuredClone(previous);
    candidate.metadata.resourceVersion = String(++this.#resourceVersion);
    table.set(k, candidate);
    this.#record("MODIFIED", resource, candidate, previous);
    return structuredClone(candidate);
  }

  delete(resource: string, namespace: string, name: string): StoredObject | undefined {
    const table = this.#table(resource);
    const previous = table.get(key(namespace, name));
    if (!previous) return undefined;
    table.delete(key(namespace, name));
    const gone = structuredClone(previous);
    gone.metadata.resourceVersion = String(++this.#resourceVersion);
    this.#record("DELETED", resource, gone, previous);
    return structuredClone(gone);
  }

  /** Changes after `resourceVersion`, or undefined when they are no longer kept (the caller answers 410). */
  changesSince(resource: string, resourceVersion: number): StoreChange[] | undefined {
    const oldest = this.#history[0];
    if (oldest && resourceVersion < oldest.resourceVersion - 1) return undefined;
    return this.#history.filter((c) => c.resource === resource && c.resourceVersion > resourceVersion);
  }

  subscribe(listener: (change: StoreChange) => void): () => void {
    this.#listeners.add(listener);
    return () => this.#listeners.delete(listener);
  }

  #record(
    type: WatchEventType,
    resource: string,
    object: StoredObject,
    previous: StoredObject | undefined,
  ): void {
    const change: StoreChange = {
      type,
      resource,
      object: structuredClone(object),
      previous: previous && structuredClone(previous),
      resourceVersion: Number(object.metadata.resourceVersion),
    };
    this.#history.push(change);
    if (this.#history.length > this.#historyLimit) this.#history.shift();
    for (const listener of this.#listeners) listener(change);
  }
}

export function isStoredObject(value: unknown): value is StoredObject {
  return isJsonObject(value) && isJsonObject(value.metadata) && typeof value.metadata.name === "string";
}
