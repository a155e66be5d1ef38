import { ACCESS_REVIEW_RESOURCE } from "./access-review.ts";

/** What a request addresses, in the terms RBAC and the request log use. */
export interface ResourceRequest {
  verb: string;
  group: string;
  version: string;
  resource: string;
  subresource: string | undefined;
  namespace: string | undefined;
  name: string | undefined;
}

interface KnownResource {
  group: string;
  version: string;
  resource: string;
  subresources: readonly string[];
}

const KNOWN_RESOURCES: readonly KnownResource[] = [
  { group: "", version: "v1", resource: "pods", subresources: ["status"] },
  { group: "", version: "v1", resource: "events", subresources: [] },
  { group: "events.k8s.io", version: "v1", resource: "events", subresources: [] },
  { group: "coordination.k8s.io", version: "v1", resource: "leases", subresources: [] },
  ACCESS_REVIEW_RESOURCE,
];

export function isWatch(query: URLSearchParams): boolean {
  const watch = query.get("watch");
  return watch === "true" || watch === "1";
}

function verbFor(method: string, named: boolean, watch: boolean): string | undefined {
  switch (method) {
    case "GET":
      if (watch) return "watch";
      return named ? "get" : "list";
    case "POST":
      return named ? undefined : "create";
    case "PUT":
      return named ? "update" : undefined;
    case "PATCH":
      return named ? "patch" : undefined;
    case "DELETE":
      return named ? "delete" : "deletecollection";
    default:
      return undefined;
  }
}

/**
 * Maps `/api/v1/namespaces/ns/pods/p1/status` (or `/apis/group/version/...`) to its parts.
 * Returns undefined for paths this server does not serve; `verb` is undefined for a method the path does not allow.
 */
export function resolveResource(
  method: string,
  pathname: string,
  query: URLSearchParams,
): (Omit<ResourceRequest, "verb"> & { verb: string | undefined }) | undefined {
  const segments = pathname
    .split("/")
    .filter((s) => s !== "")
    .map(decodeURIComponent);
  let group: string;
  let version: string;
  let rest: string[];
  if (segments[0] === "api") {
    group = "";
    version = segments[1] ?? "";
    rest = segments.slice(2);
  } else if (segments[0] === "apis") {
    group = segments[1] ?? "";
    version = segments[2] ?? "";
    rest = segments.slice(3);
  } else {
    return undefined;
  }
  let namespace: string | undefined;
  if (rest[0] === "namespaces" && rest.length >= 3) {
    namespace = rest[1];
    rest = rest.slice(2);
  }
  const [resource, name, subresource, ...extra] = rest;
  const known = KNOWN_RESOURCES.find(
    (r) => r.group === group && r.version === version && r.resource === resource,
  );
  if (!known || extra.length > 0) return undefined;
  if (subresource !== undefined && !known.subresources.includes(subresource)) return undefined;
  if (namespace === undefined && name !== undefined) return undefined;
  return {
    verb: verbFor(method, name !== undefined, isWatch(query)),
    group,
    version,
    resource: known.resource,
    subresource,
    namespace,
    name,
  };
}
