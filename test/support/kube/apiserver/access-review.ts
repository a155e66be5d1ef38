// SelfSubjectAccessReview (authorization.k8s.io/v1): "may I do this?", answered from the Role
// the server was given, or allowed for everything when it has none. Like the real cluster's
// system:basic-user binding, any authenticated caller may ask, whatever its Role says.
import { type HandlerRequest, type HandlerResult, json } from "./handler-types.ts";
import { isJsonObject } from "./patch/json-value.ts";
import { authorize, type normalizeRole } from "./rbac.ts";
import type { ResourceRequest } from "./routes.ts";
import { badRequest } from "./status-errors.ts";
import { parseJsonBody } from "./wire-format.ts";

export const ACCESS_REVIEW_RESOURCE = {
  group: "authorization.k8s.io",
  version: "v1",
  resource: "selfsubjectaccessreviews",
  subresources: [],
} as const;

export function isSelfAccessReview(target: ResourceRequest): boolean {
  return target.group === ACCESS_REVIEW_RESOURCE.group && target.resource === ACCESS_REVIEW_RESOURCE.resource;
}

function text(value: unknown): string {
  return typeof value === "string" ? value : "";
}

export function handleSelfAccessReview(
  request: HandlerRequest,
  role: ReturnType<typeof normalizeRole> | undefined,
  user: string,
): HandlerResult {
  if (request.target.verb !== "create") throw badRequest("selfsubjectaccessreviews only accept create");
  const review = parseJsonBody(request.body);
  const spec = isJsonObject(review) && isJsonObject(review.spec) ? review.spec : undefined;
  const attributes = spec && isJsonObject(spec.resourceAttributes) ? spec.resourceAttributes : undefined;
  if (!attributes)
    throw badRequest("spec.resourceAttributes is required (nonResourceAttributes are not served)");
  const asked: ResourceRequest = {
    verb: text(attributes.verb),
    group: text(attributes.group),
    version: text(attributes.version),
    resource: text(attributes.resource),
    subresource: text(attributes.subresource) || undefined,
    namespace: text(attributes.namespace) || undefined,
    name: text(attributes.name) || undefined,
  };
  const allowed = role === undefined || authorize(role, user, asked, undefined) === undefined;
  return json(201, {
    kind: "SelfSubjectAccessReview",
    apiVersion: "authorization.k8s.io/v1",
    metadata: { creationTimestamp: null },
    spec,
    status: allowed
      ? { allowed: true, reason: "RBAC: allowed by the test server's Role" }
      : { allowed: false },
  });
}
