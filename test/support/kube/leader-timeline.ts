// Who was shown as leader, and when, read from what the candidates sent the API server (the
// request log's arrival times): pglease's role-label patches, or client-go's Lease writes. From
// it: how often leadership changed hands and how long no one was shown leading.
import type { RecordedRequest } from "./apiserver/index.ts";

export interface Shown {
  at: number;
  pod: string;
  leader: boolean;
}

export interface LeaderTimeline {
  /** The pods shown leading, in turn (the first is the one leading at the start). */
  leaders: string[];
  /** Times leadership moved to another pod. */
  changes: number;
  /** Time within the window when no pod was shown leading. */
  unlabelledMs: number;
}

const ROLE = /"pglease\.io\/role":"([a-z]+)"/;

/**
 * The role label a patch sets: a merge patch's, or a JSON patch's (a leader's own, a peer's
 * demotion), whose `add` sets the label or brings the whole labels map; a `test` only reads it.
 */
export function roleIn(body: unknown): string | undefined {
  if (Array.isArray(body)) {
    for (const op of body) {
      if (op?.op !== "add") continue;
      if (op.path === ROLE_POINTER && typeof op.value === "string") return op.value;
      const whole = op.path === LABELS_POINTER ? op.value?.["pglease.io/role"] : undefined;
      if (typeof whole === "string") return whole;
    }
    return undefined;
  }
  return ROLE.exec(JSON.stringify(body ?? null))?.[1];
}

const LABELS_POINTER = "/metadata/labels";
const ROLE_POINTER = `${LABELS_POINTER}/pglease.io~1role`;

/** pglease: the pods' role label as patched (accepted patches only), and each pod's removal. */
export function labelEvents(
  requests: readonly RecordedRequest[],
  removedAt: ReadonlyMap<string, number>,
): Shown[] {
  const shown: Shown[] = [];
  for (const r of requests) {
    if (r.method !== "PATCH" || r.resource !== "pods" || r.subresource || r.status !== 200 || !r.name)
      continue;
    const role = roleIn(r.body);
    if (role) shown.push({ at: r.at, pod: r.name, leader: role === "leader" });
  }
  for (const [pod, at] of removedAt) shown.push({ at, pod, leader: false });
  return shown;
}

/**
 * client-go: its Lease as written (accepted writes only); a write naming no holder is the release.
 * `pods` maps each holder identity to its pod. client-go writes protobuf: the holder is found as
 * the identity the body holds.
 */
export function leaseEvents(
  requests: readonly RecordedRequest[],
  pods: ReadonlyMap<string, string>,
): Shown[] {
  const shown: Shown[] = [];
  let holder: string | undefined;
  for (const r of requests) {
    if (r.resource !== "leases" || (r.method !== "PUT" && r.method !== "POST")) continue;
    if (r.status !== 200 && r.status !== 201) continue;
    const body = typeof r.body === "string" ? r.body : JSON.stringify(r.body ?? null);
    const identity = [...pods.keys()].find((id) => body.includes(id));
    const pod = identity === undefined ? undefined : pods.get(identity);
    if (pod === holder) continue;
    if (holder) shown.push({ at: r.at, pod: holder, leader: false });
    if (pod) shown.push({ at: r.at, pod, leader: true });
    holder = pod;
  }
  return shown;
}

/** The timeline over [from, to], `initial` shown leading at `from`. */
export function timeline(
  events: readonly Shown[],
  initial: string,
  from: number,
  to: number,
): LeaderTimeline {
  const showing = new Set([initial]);
  const leaders = [initial];
  let unlabelledMs = 0;
  let last = from;
  const inWindow = events.filter((e) => e.at >= from && e.at <= to).sort((a, b) => a.at - b.at);
  for (const e of inWindow) {
    if (showing.size === 0) unlabelledMs += e.at - last;
    last = e.at;
    if (e.leader) {
      showing.add(e.pod);
      if (leaders.at(-1) !== e.pod) leaders.push(e.pod);
    } else showing.delete(e.pod);
  }
  if (showing.size === 0) unlabelledMs += to - last;
  return { leaders, changes: leaders.length - 1, unlabelledMs };
}
