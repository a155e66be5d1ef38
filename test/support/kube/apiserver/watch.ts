import type { IncomingMessage, ServerResponse } from "node:http";
import type { WatchSpec } from "./handler-types.ts";
import type { JsonObject } from "./patch/json-value.ts";
import { parseFieldSelector, parseLabelSelector } from "./selectors.ts";
import { type ApiError, badRequest, gone } from "./status-errors.ts";
import type { ObjectStore, StoreChange, StoredObject } from "./store.ts";

export type DropMode = "reset" | "end";

interface OpenWatch {
  request: IncomingMessage;
  response: ServerResponse;
  stop: () => void;
}

interface WatchEvent {
  type: "ADDED" | "MODIFIED" | "DELETED" | "BOOKMARK" | "ERROR";
  object: unknown;
}

function startingResourceVersion(query: URLSearchParams): number | undefined {
  const raw = query.get("resourceVersion");
  if (raw === null || raw === "" || raw === "0") return undefined;
  if (!/^[0-9]+$/.test(raw))
    throw badRequest(`resourceVersion: Invalid value: "${raw}": must be a non-negative integer`);
  return Number(raw);
}

/** Ends a watch with one ERROR event carrying the Status, as kube-apiserver does (200 if not yet sent). */
export function sendWatchError(response: ServerResponse, error: ApiError): void {
  if (response.destroyed) return;
  if (!response.headersSent) response.writeHead(200, WATCH_HEADERS);
  response.end(`${JSON.stringify({ type: "ERROR", object: error.toStatus() } satisfies WatchEvent)}\n`);
}

const WATCH_HEADERS = { "Content-Type": "application/json", "Cache-Control": "no-cache, private" };

/**
 * Streams newline-delimited watch events, as kube-apiserver does. A selector watch sees an object
 * that starts matching as ADDED and one that stops matching as DELETED, which informers rely on.
 */
export class WatchHub {
  readonly #store: ObjectStore;
  readonly #open = new Set<OpenWatch>();
  readonly #waiters = new Set<() => void>();

  constructor(store: ObjectStore) {
    this.#store = store;
  }

  get count(): number {
    return this.#open.size;
  }

  /** Resolves once at least `n` watches are streaming, so a test can change state knowing it will be seen. */
  waitForWatches(n = 1): Promise<void> {
    if (this.#open.size >= n) return Promise.resolve();
    return new Promise((resolve) => {
      const check = () => {
        if (this.#open.size >= n) {
          this.#waiters.delete(check);
          resolve();
        }
      };
      this.#waiters.add(check);
    });
  }

  /** Validates the request and starts streaming; throws (before any byte is sent) for a bad selector. */
  serve(spec: WatchSpec, request: IncomingMessage, response: ServerResponse): void {
    const labels = parseLabelSelector(spec.query.get("labelSelector"));
    const fields = parseFieldSelector(spec.resource, spec.query.get("fieldSelector"));
    const from = startingResourceVersion(spec.query);
    const matches = (o: StoredObject | undefined): boolean =>
      o !== undefined &&
      (spec.namespace === undefined || o.metadata.namespace === spec.namespace) &&
      labels(o.metadata.labels as Record<string, string> | undefined) &&
      fields(o);
    const toEvent = (change: StoreChange): WatchEvent | undefined => {
      if (change.resource !== spec.resource) return undefined;
      const now = matches(change.object);
      const before = matches(change.previous);
      if (change.type === "DELETED")
        return before ? { type: "DELETED", object: spec.present(change.object) } : undefined;
      if (now && before) return { type: "MODIFIED", object: spec.present(change.object) };
      if (now) return { type: "ADDED", object: spec.present(change.object) };
      if (before) return { type: "DELETED", object: spec.present(change.object) };
      return undefined;
    };

    response.writeHead(200, WATCH_HEADERS);
    response.flushHeaders();
    const send = (event: WatchEvent) => {
      if (!response.writableEnded) response.write(`${JSON.stringify(event)}\n`);
    };

    const unsubscribe = this.#store.subscribe((change) => {
      const event = toEvent(change);
      if (event) send(event);
    });
    let timer: NodeJS.Timeout | undefined;
    const entry: OpenWatch = {
      request,
      response,
      stop: () => {
        unsubscribe();
        clearTimeout(timer);
        this.#open.delete(entry);
      },
    };
    this.#open.add(entry);
    response.on("close", entry.stop);
    for (const waiter of [...this.#waiters]) waiter();

    if (from === undefined) {
      for (const object of this.#store.list(spec.resource, spec.namespace).filter(matches)) {
        send({ type: "ADDED", object: spec.present(object) });
      }
      if (spec.query.get("sendInitialEvents") === "true") {
        send({ type: "BOOKMARK", object: this.#bookmark(spec) });
      }
    } else {
      const replay = this.#store.changesSince(spec.resource, from);
      if (replay === undefined) {
        sendWatchError(response, gone(`too old resource version: ${from} (${this.#store.resourceVersion})`));
        return;
      }
      for (const change of replay) {
        const event = toEvent(change);
        if (event) send(event);
      }
    }
    const timeout = Number(spec.query.get("timeoutSeconds") ?? "");
    if (Number.isFinite(timeout) && timeout > 0) timer = setTimeout(() => response.end(), timeout * 1000);
  }

  #bookmark(spec: WatchSpec): JsonObject {
    const { kind, apiVersion } = spec.present({
      metadata: { name: "", namespace: "", uid: "", resourceVersion: "" },
    } as StoredObject);
    return {
      kind,
      apiVersion,
      metadata: {
        resourceVersion: String(this.#store.resourceVersion),
        annotations: { "k8s.io/initial-events-end": "true" },
      },
    };
  }

  /** Ends matching watches: "reset" kills the socket (a crash or network cut), "end" closes the stream cleanly. */
  drop(matches: (request: IncomingMessage) => boolean, mode: DropMode): number {
    let dropped = 0;
    for (const watch of [...this.#open]) {
      if (!matches(watch.request)) continue;
      dropped++;
      watch.stop();
      if (mode === "end") watch.response.end();
      else watch.request.socket.resetAndDestroy();
    }
    return dropped;
  }
}
