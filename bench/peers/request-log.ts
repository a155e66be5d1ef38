// What the bench reads from the test API server's request log: the moment a change was
// accepted, by the server's arrival time of the request that made it.
import type { RecordedRequest } from "../../test/support/kube-apiserver/index.ts";

const ROLE_LABEL = "pglease.io/role";

/** An accepted write of the Lease naming a holder other than `oldHolder` (a release names nobody). */
export function leaseNamesNewHolder(oldHolder: string | null): (r: RecordedRequest) => boolean {
  return (r) => {
    const holder = (r.body as { spec?: { holderIdentity?: string } } | undefined)?.spec?.holderIdentity;
    return (
      r.resource === "leases" && (r.status === 200 || r.status === 201) && !!holder && holder !== oldHolder
    );
  };
}

/** An accepted patch of the pod itself (not its status) that labels it leader. */
export function podLabelledLeader(pod: string | undefined): (r: RecordedRequest) => boolean {
  return (r) =>
    r.method === "PATCH" &&
    r.name === pod &&
    r.subresource === undefined &&
    r.status === 200 &&
    JSON.stringify(r.body ?? null).includes(`"${ROLE_LABEL}":"leader"`);
}

export function roleLabelOf(labels: Record<string, string> | undefined): string | undefined {
  return labels?.[ROLE_LABEL];
}
