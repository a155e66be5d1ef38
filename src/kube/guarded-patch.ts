// "Never two pods labelled leader", also when a label patch arrives late: its process paused
// between the check that it still leads and the send, or the patch waited at the API server longer
// than a handover takes. No precondition on another pod exists, so the two sides meet on each pod:
// - a new leader, before it labels itself, writes its fence into every peer's superseded-by
//   annotation (fencing it off), and demotes the peers still labelled leader by an older term;
// - a leader labels its own pod with a JSON patch (RFC 6902) whose `test` operation says the
//   superseded-by annotation is still what it saw when it checked that it leads, and never when it
//   saw a fence at or above its own there.
// Both orders are covered. An old label that reaches the pod after the fencing write fails its
// test (422) and the old leader, reading its pod again, sees the newer fence and stops. One that
// lands before it makes the fencing write fail in turn: that write also tests the role label as
// the new leader saw it (not leader), so the new leader reads its peers again, demotes the old one,
// and labels itself only after that. A resourceVersion precondition would catch both too, but
// also every unrelated write (the kubelet's status, the pod's own condition sent alongside).
// Fencing writes only raise the annotation and test its previous value, so two stale leaders
// cannot lower it under a newer term's.

import { POD_CONTRACT } from "../shared/pod-contract.ts";
import type { Pod } from "./client/api-types.ts";
import type { MetadataPatch } from "./desired-state.ts";

export interface JsonPatchOperation {
  op: "test" | "add" | "remove";
  path: string;
  value?: unknown;
}

/** The keys whose values as seen must still hold on the server for the patch to apply. */
export interface Guards {
  labels?: string[];
  annotations?: string[];
  /**
   * A key the change removes and `seen` had is removed also when it is gone meanwhile (added
   * first, then removed): for a demotion, which must not fail because the peer cleared it itself.
   */
  removeGone?: boolean;
}

/** The fence of the newest term that fenced this pod off, or null when none did. */
export function supersededBy(pod: Pod | undefined): number | null {
  const value = pod?.metadata?.annotations?.[POD_CONTRACT.supersededAnnotation] ?? "";
  return /^\d{1,15}$/.test(value) ? Number(value) : null;
}

/**
 * The annotation that fences `pod` off for every term up to `fence`, or null when this term
 * already did. Called only while the term of `fence` leads, so a value above it is stale (from
 * before the fence sequence went back: no newer term exists yet) and is replaced too: a held
 * label of that pod which tests the stale value must fail, or it lands beside this term's.
 */
export function fenceOff(pod: Pod, fence: number): Record<string, string> | null {
  return supersededBy(pod) === fence ? null : { [POD_CONTRACT.supersededAnnotation]: String(fence) };
}

/**
 * `change` (a metadata merge patch computed against `seen`) as a JSON patch that applies only
 * while every guarded key still has the value `seen` shows (absent included).
 */
export function guardedPatch(
  seen: Pod | undefined,
  change: MetadataPatch,
  guards: Guards,
): JsonPatchOperation[] {
  return [
    ...mapOperations("labels", seen?.metadata?.labels, change.metadata.labels, guards.labels ?? [], guards),
    ...mapOperations(
      "annotations",
      seen?.metadata?.annotations,
      change.metadata.annotations,
      guards.annotations ?? [],
      guards,
    ),
  ];
}

function mapOperations(
  name: "labels" | "annotations",
  seen: Record<string, string> | undefined,
  changes: Record<string, string | null> | undefined,
  guards: string[],
  { removeGone = false }: Guards,
): JsonPatchOperation[] {
  const base = `/metadata/${name}`;
  if (seen === undefined) {
    // The API server leaves an empty map out: the map must still be absent, and comes whole.
    if (guards.length === 0 && changes === undefined) return [];
    const added = Object.fromEntries(Object.entries(changes ?? {}).filter(([, v]) => v !== null));
    return [
      { op: "test", path: base, value: null },
      ...(Object.keys(added).length > 0 ? [{ op: "add" as const, path: base, value: added }] : []),
    ];
  }
  // A missing key tests equal to null on the API server (json-patch v4), as absent was seen.
  const ops: JsonPatchOperation[] = guards.map((key) => ({
    op: "test",
    path: `${base}/${pointerToken(key)}`,
    value: seen[key] ?? null,
  }));
  for (const [key, value] of Object.entries(changes ?? {})) {
    const path = `${base}/${pointerToken(key)}`;
    if (value !== null) {
      ops.push({ op: "add", path, value });
    } else if (Object.hasOwn(seen, key)) {
      // Removing a key gone meanwhile fails the patch (the pass reads the pod and tries again),
      // unless it is added first: `add` replaces a key or creates it, so the `remove` then applies.
      if (removeGone) ops.push({ op: "add", path, value: "" });
      ops.push({ op: "remove", path });
    }
  }
  return ops;
}

/** A key as one JSON pointer token (RFC 6901): "pglease.io/role" → "pglease.io~1role". */
function pointerToken(key: string): string {
  return key.replaceAll("~", "~0").replaceAll("/", "~1");
}
