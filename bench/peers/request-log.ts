// What the bench reads from the API server's request log (the recording proxy's in front of the
// real server, or the in-process server's): the moment a change was accepted, by the arrival time
// of the request that made it.
import type { RecordedRequest } from "../../test/support/kube/apiserver/index.ts";
import { roleIn } from "../../test/support/kube/leader-timeline.ts";

/**
 * An accepted write of the Lease naming one of `contenders` (a release names nobody). Real
 * client-go sends built-in types as protobuf, whose strings are their UTF-8 bytes: the identity
 * is found in the body's text; the TypeScript port sends JSON.
 */
export function leaseNamesNewHolder(contenders: string[]): (r: RecordedRequest) => boolean {
  return (r) => {
    if (r.resource !== "leases" || (r.status !== 200 && r.status !== 201)) return false;
    if (typeof r.body === "string") return contenders.some((id) => (r.body as string).includes(id));
    const holder = (r.body as { spec?: { holderIdentity?: string } } | undefined)?.spec?.holderIdentity;
    return holder !== undefined && contenders.includes(holder);
  };
}

/** An accepted patch of the pod itself (not its status) that labels it leader. */
export function podLabelledLeader(pod: string | undefined): (r: RecordedRequest) => boolean {
  return podLabelled(pod, "leader");
}

/**
 * An accepted patch of the pod itself (not its status) that labels it `role`: a follower's merge
 * patch, or the JSON patch of a leader's guarded self-label or a peer's demotion (guarded-patch.ts).
 */
export function podLabelled(
  pod: string | undefined,
  role: "leader" | "follower",
): (r: RecordedRequest) => boolean {
  return (r) =>
    r.method === "PATCH" &&
    r.name === pod &&
    r.subresource === undefined &&
    r.status === 200 &&
    roleIn(r.body) === role;
}
