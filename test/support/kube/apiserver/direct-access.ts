import type { CoreV1Event, V1Pod } from "@kubernetes/client-node";
import { ObjectSerializer } from "@kubernetes/client-node/dist/serializer.js";
import { kubeletPodStatus } from "../kubelet-status.ts";
import { presentCoreEvent } from "./events.ts";
import { isJsonObject, type JsonObject } from "./patch/json-value.ts";
import { metadataFieldErrors } from "./pod-updates.ts";
import { deleteNow, podBody } from "./pods.ts";
import type { ObjectStore, StoredObject } from "./store.ts";
import { normalizeTimes } from "./wire-format.ts";

// State access for tests, without HTTP: objects go through client-node's own serializer so a test
// sees exactly the types (Date timestamps included) that the client hands to production code.

function toWire(pod: V1Pod): JsonObject {
  return normalizeTimes(ObjectSerializer.serialize(pod, "V1Pod")) as JsonObject;
}

function toPod(stored: StoredObject): V1Pod {
  return toPodOf(podBody(stored));
}

function toPodOf(wire: JsonObject): V1Pod {
  return ObjectSerializer.deserialize(wire, "V1Pod") as V1Pod;
}

function checkMetadata(metadata: JsonObject, what: string): void {
  const errors = metadataFieldErrors(metadata);
  if (errors.length > 0) {
    throw new Error(
      `${what}: ${errors.map((e) => `${e.field}: ${JSON.stringify(e.value)}: ${e.detail}`).join("; ")}`,
    );
  }
}

/**
 * Stores a pod as if it had been created and started long ago. Missing parts are filled: namespace
 * "default", one container "app", and (when no status is given) the status a kubelet writes for it, running.
 */
export function seedPod(store: ObjectStore, pod: V1Pod): V1Pod {
  const wire = toWire(pod);
  const metadata = isJsonObject(wire.metadata) ? wire.metadata : {};
  if (typeof metadata.name !== "string" || metadata.name === "")
    throw new Error("seedPod: metadata.name is required");
  metadata.namespace =
    typeof metadata.namespace === "string" && metadata.namespace !== "" ? metadata.namespace : "default";
  checkMetadata(metadata, `seedPod ${metadata.namespace}/${metadata.name}`);
  if (store.get("pods", String(metadata.namespace), metadata.name)) {
    throw new Error(`seedPod: pod ${metadata.namespace}/${metadata.name} already exists`);
  }
  const spec = isJsonObject(wire.spec) ? wire.spec : {};
  if (!Array.isArray(spec.containers) || spec.containers.length === 0) {
    spec.containers = [{ name: "app", image: "registry.invalid/app:1" }];
  }
  // The kubelet's report of a pod started long ago (the server fills generation 1 on create).
  const status =
    wire.status ??
    toWire({ status: kubeletPodStatus(toPodOf({ metadata: { ...metadata, generation: 1 }, spec })) }).status;
  delete wire.kind;
  delete wire.apiVersion;
  return toPod(store.create("pods", { ...wire, metadata, spec, status }));
}

export function readPod(store: ObjectStore, namespace: string, name: string): V1Pod | undefined {
  const stored = store.get("pods", namespace, name);
  return stored && toPod(stored);
}

export function readPods(store: ObjectStore, namespace: string): V1Pod[] {
  return store.list("pods", namespace).map(toPod);
}

/** Another actor's write (kubectl, the kubelet): any field may change, identity and resourceVersion stay the server's. */
export function mutatePod(
  store: ObjectStore,
  namespace: string,
  name: string,
  change: (pod: V1Pod) => void,
): V1Pod {
  const stored = store.get("pods", namespace, name);
  if (!stored) throw new Error(`mutatePod: pod ${namespace}/${name} does not exist`);
  const pod = toPod(stored);
  change(pod);
  const wire = toWire(pod) as StoredObject;
  delete wire.kind;
  delete wire.apiVersion;
  wire.metadata = {
    ...(isJsonObject(wire.metadata) ? wire.metadata : {}),
    name,
    namespace,
    uid: stored.metadata.uid,
    resourceVersion: stored.metadata.resourceVersion,
    creationTimestamp: stored.metadata.creationTimestamp,
  };
  checkMetadata(wire.metadata, `mutatePod ${namespace}/${name}`);
  return toPod(store.update("pods", wire));
}

export function removePod(store: ObjectStore, namespace: string, name: string): void {
  const existing = store.get("pods", namespace, name);
  if (!existing) throw new Error(`deletePod: pod ${namespace}/${name} does not exist`);
  deleteNow(store, existing);
}

export function readEvents(store: ObjectStore, namespace: string): CoreV1Event[] {
  return store
    .list("events", namespace)
    .map((e) => ObjectSerializer.deserialize(presentCoreEvent(e), "CoreV1Event") as CoreV1Event);
}
