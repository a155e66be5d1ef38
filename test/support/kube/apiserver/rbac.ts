import type { V1PolicyRule, V1Role } from "@kubernetes/client-node";
import type { ResourceRequest } from "./routes.ts";
import { type ApiError, forbidden } from "./status-errors.ts";

/** A Role as a plain object (e.g. parsed from the chart's YAML) or client-node's V1Role. */
export type RoleLike =
  | Pick<V1Role, "metadata" | "rules">
  | { metadata?: { namespace?: string }; rules?: unknown };

function stringList(value: unknown, where: string): string[] {
  if (value === undefined || value === null) return [];
  if (!Array.isArray(value) || value.some((v) => typeof v !== "string")) {
    throw new Error(`${where} must be a list of strings`);
  }
  return value as string[];
}

/** Checks the shape up front so a malformed Role fails the test at setup, naming the field. */
export function normalizeRole(role: RoleLike): { namespace: string | undefined; rules: V1PolicyRule[] } {
  if (!Array.isArray(role.rules)) throw new Error("role.rules must be a list of rules");
  const rules = role.rules.map((rule: unknown, i: number): V1PolicyRule => {
    if (typeof rule !== "object" || rule === null) throw new Error(`role.rules[${i}] must be an object`);
    const r = rule as Record<string, unknown>;
    return {
      apiGroups: stringList(r.apiGroups, `role.rules[${i}].apiGroups`),
      resources: stringList(r.resources, `role.rules[${i}].resources`),
      verbs: stringList(r.verbs, `role.rules[${i}].verbs`),
      resourceNames: stringList(r.resourceNames, `role.rules[${i}].resourceNames`),
    };
  });
  return { namespace: role.metadata?.namespace, rules };
}

function resourceMatches(rule: V1PolicyRule, resource: string, subresource: string | undefined): boolean {
  const combined = subresource ? `${resource}/${subresource}` : resource;
  return (rule.resources ?? []).some(
    (r) => r === "*" || r === combined || (subresource !== undefined && r === `*/${subresource}`),
  );
}

/** The RBAC authorizer's rule match: group, resource (with subresource), verb and, if listed, name. */
export function ruleAllows(rule: V1PolicyRule, attrs: ResourceRequest, name: string | undefined): boolean {
  const groupOk = (rule.apiGroups ?? []).some((g) => g === "*" || g === attrs.group);
  const verbOk = rule.verbs.some((v) => v === "*" || v === attrs.verb);
  const names = rule.resourceNames ?? [];
  const nameOk = names.length === 0 || (name !== undefined && names.includes(name));
  return groupOk && verbOk && nameOk && resourceMatches(rule, attrs.resource, attrs.subresource);
}

/** The 403 the real server sends, e.g. `pods "p1" is forbidden: User "…" cannot patch resource "pods/status" …`. */
export function forbiddenFor(user: string, attrs: ResourceRequest): ApiError {
  const resource = attrs.subresource ? `${attrs.resource}/${attrs.subresource}` : attrs.resource;
  const scope =
    attrs.namespace === undefined ? "at the cluster scope" : `in the namespace "${attrs.namespace}"`;
  return forbidden(
    attrs.group,
    attrs.resource,
    attrs.name,
    `User "${user}" cannot ${attrs.verb} resource "${resource}" in API group "${attrs.group}" ${scope}`,
  );
}

/**
 * Undefined when the Role grants the request. A list or watch pinned by `fieldSelector=metadata.name=X`
 * counts as addressing X, as the real authorizer does for resourceNames.
 */
export function authorize(
  role: ReturnType<typeof normalizeRole>,
  user: string,
  attrs: ResourceRequest,
  nameFromSelector: string | undefined,
): ApiError | undefined {
  const inScope =
    attrs.namespace !== undefined && (role.namespace === undefined || role.namespace === attrs.namespace);
  const name = attrs.name ?? nameFromSelector;
  if (inScope && role.rules.some((rule) => ruleAllows(rule, attrs, name))) return undefined;
  return forbiddenFor(user, attrs);
}
