import { isJsonObject } from "./patch/json-value.ts";
import { badRequest } from "./status-errors.ts";
import { labelValueErrors, qualifiedNameErrors } from "./validation.ts";

type Labels = Record<string, string>;
export type LabelPredicate = (labels: Labels | undefined) => boolean;

function splitRequirements(selector: string): string[] {
  const parts: string[] = [];
  let depth = 0;
  let current = "";
  for (const ch of selector) {
    if (ch === "(") depth++;
    if (ch === ")") depth--;
    if (ch === "," && depth === 0) {
      parts.push(current);
      current = "";
    } else {
      current += ch;
    }
  }
  parts.push(current);
  return parts.map((p) => p.trim());
}

function invalidRequirement(detail: string): Error {
  return badRequest(`unable to parse requirement: ${detail}`);
}

function checkKey(key: string): string {
  const errors = qualifiedNameErrors(key);
  if (errors.length > 0) throw invalidRequirement(`invalid label key "${key}": ${errors.join("; ")}`);
  return key;
}

function checkValue(value: string): string {
  const errors = labelValueErrors(value);
  if (errors.length > 0) throw invalidRequirement(`invalid label value: "${value}": ${errors.join("; ")}`);
  return value;
}

function parseRequirement(text: string): LabelPredicate {
  let m = /^!\s*(\S+)$/.exec(text);
  if (m) {
    const key = checkKey(m[1] ?? "");
    return (labels) => labels?.[key] === undefined;
  }
  m = /^(\S+)\s+(in|notin)\s*\((.*)\)$/.exec(text);
  if (m) {
    const key = checkKey(m[1] ?? "");
    const values = (m[3] ?? "").split(",").map((v) => checkValue(v.trim()));
    if (m[2] === "in") return (labels) => labels?.[key] !== undefined && values.includes(labels[key]);
    return (labels) => labels?.[key] === undefined || !values.includes(labels[key]);
  }
  m = /^([^=!<>\s(),]+)\s*(==|=|!=)\s*([^=!<>\s(),]*)$/.exec(text);
  if (m) {
    const key = checkKey(m[1] ?? "");
    const value = checkValue(m[3] ?? "");
    if (m[2] === "!=") return (labels) => labels?.[key] !== value;
    return (labels) => labels?.[key] === value;
  }
  m = /^([^=!<>\s(),]+)\s*([<>])\s*(\S+)$/.exec(text);
  if (m) {
    const key = checkKey(m[1] ?? "");
    const bound = Number(m[3]);
    if (!Number.isInteger(bound))
      throw invalidRequirement(`for 'Gt', 'Lt' operators, the value must be an integer`);
    const above = m[2] === ">";
    return (labels) => {
      const raw = labels?.[key];
      if (raw === undefined || !/^-?[0-9]+$/.test(raw)) return false;
      return above ? Number(raw) > bound : Number(raw) < bound;
    };
  }
  if (/^[^=!<>\s(),]+$/.test(text)) {
    const key = checkKey(text);
    return (labels) => labels?.[key] !== undefined;
  }
  throw invalidRequirement(`cannot parse ${JSON.stringify(text)}`);
}

/** A `labelSelector` query value: `k=v`, `k==v`, `k!=v`, `k`, `!k`, `k in (a,b)`, `k notin (a,b)`, `k>1`. */
export function parseLabelSelector(selector: string | null | undefined): LabelPredicate {
  if (!selector || selector.trim() === "") return () => true;
  const requirements = splitRequirements(selector).map(parseRequirement);
  return (labels) => requirements.every((r) => r(labels));
}

export type FieldPredicate = (object: unknown) => boolean;

function fieldValue(object: unknown, path: string): string {
  let node: unknown = object;
  for (const part of path.split(".")) node = isJsonObject(node) ? node[part] : undefined;
  if (node === undefined || node === null) return path === "spec.hostNetwork" ? "false" : "";
  return String(node);
}

/** Fields each resource can be filtered on, as the real server registers them. */
export const SUPPORTED_FIELDS: Readonly<Record<string, readonly string[]>> = {
  pods: [
    "metadata.name",
    "metadata.namespace",
    "spec.nodeName",
    "spec.restartPolicy",
    "spec.schedulerName",
    "spec.serviceAccountName",
    "spec.hostNetwork",
    "status.phase",
    "status.podIP",
    "status.nominatedNodeName",
  ],
  events: [
    "metadata.name",
    "metadata.namespace",
    "involvedObject.kind",
    "involvedObject.namespace",
    "involvedObject.name",
    "involvedObject.uid",
    "involvedObject.apiVersion",
    "involvedObject.resourceVersion",
    "involvedObject.fieldPath",
    "reason",
    "reportingComponent",
    "source",
    "type",
  ],
};

/** A `fieldSelector` query value: comma-separated `field=value`, `field==value` or `field!=value`. */
export function parseFieldSelector(resource: string, selector: string | null | undefined): FieldPredicate {
  if (!selector || selector.trim() === "") return () => true;
  const supported = SUPPORTED_FIELDS[resource] ?? [];
  const tests = selector.split(",").map((raw) => {
    const m = /^\s*([^=!\s]+)\s*(==|=|!=)\s*(.*?)\s*$/.exec(raw);
    if (!m) throw badRequest(`invalid selector: '${selector}'; can't understand '${raw}'`);
    const [, field = "", op, value = ""] = m;
    if (!supported.includes(field)) throw badRequest(`field label not supported: ${field}`);
    return (object: unknown) => (fieldValue(object, field) === value) === (op !== "!=");
  });
  return (object) => tests.every((t) => t(object));
}

/** The value a `metadata.name=X` field selector pins, which RBAC treats as the request's name. */
export function nameFromFieldSelector(selector: string | null | undefined): string | undefined {
  for (const raw of (selector ?? "").split(",")) {
    const m = /^\s*metadata\.name\s*(==|=)\s*(.*?)\s*$/.exec(raw);
    if (m) return m[2];
  }
  return undefined;
}
