// Kubernetes' own syntax rules for the names this package writes onto pods, checked before
// anything is sent: an invalid key would otherwise surface as a 422 on every patch, forever.
// Each check returns null when the value is fine, or a sentence saying what is wrong.

const DNS_LABEL = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/;
const DNS_SUBDOMAIN = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;
const QUALIFIED_NAME_PART = /^[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$/;
const LABEL_VALUE = /^([A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?)?$/;

export function dnsLabelProblem(value: string): string | null {
  if (value.length > 63) return "must be at most 63 characters";
  if (!DNS_LABEL.test(value)) {
    return "must be lower-case letters, digits and '-', starting and ending with a letter or digit";
  }
  return null;
}

export function dnsSubdomainProblem(value: string): string | null {
  if (value.length > 253) return "must be at most 253 characters";
  if (!DNS_SUBDOMAIN.test(value)) {
    return "must be dot-separated lower-case letters, digits and '-', each part starting and ending with a letter or digit";
  }
  return null;
}

/** Label keys, annotation keys and condition types: `[prefix/]name`, prefix a DNS subdomain. */
export function qualifiedNameProblem(value: string): string | null {
  const parts = value.split("/");
  if (parts.length > 2) return "must be a name with at most one '/' (an optional DNS-subdomain prefix)";
  const name = parts.length === 2 ? (parts[1] as string) : value;
  if (parts.length === 2) {
    const prefix = parts[0] as string;
    if (prefix === "") return "has an empty prefix before '/'";
    const problem = dnsSubdomainProblem(prefix);
    if (problem !== null) return `has an invalid prefix ${JSON.stringify(prefix)}: ${problem}`;
  }
  if (name === "") return "has an empty name";
  if (name.length > 63) return "has a name part longer than 63 characters";
  if (!QUALIFIED_NAME_PART.test(name)) {
    return "must have a name part of letters, digits, '-', '_' and '.', starting and ending with a letter or digit";
  }
  return null;
}

export function labelValueProblem(value: string): string | null {
  if (value.length > 63) return "must be at most 63 characters";
  if (!LABEL_VALUE.test(value)) {
    return "must be empty or letters, digits, '-', '_' and '.', starting and ending with a letter or digit";
  }
  return null;
}

export interface SelectorRequirement {
  key: string;
  operator: "exists" | "not-exists" | "=" | "!=" | "in" | "notin" | ">" | "<";
  values: string[];
}

/**
 * Parses a label selector in the syntax `kubectl -l` and the API's `labelSelector` accept:
 * `a=b`, `a==b`, `a!=b`, `a`, `!a`, `a in (x,y)`, `a notin (x)`, `a>1`, `a<1`, comma-joined.
 */
export function parseLabelSelector(
  selector: string,
): { requirements: SelectorRequirement[] } | { problem: string } {
  const requirements: SelectorRequirement[] = [];
  for (const raw of splitOutsideParentheses(selector)) {
    const text = raw.trim();
    if (text === "") return { problem: "has an empty requirement (stray comma?)" };
    const parsed = parseRequirement(text);
    if ("problem" in parsed) return parsed;
    requirements.push(parsed);
  }
  return { requirements };
}

function splitOutsideParentheses(selector: string): string[] {
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
  return parts;
}

const SET_REQUIREMENT = /^(\S+)\s+(in|notin)\s*\((.*)\)$/;
const EQUALITY_REQUIREMENT = /^([^\s=!<>]+)\s*(==|=|!=|>|<)\s*(.*)$/;

function parseRequirement(text: string): SelectorRequirement | { problem: string } {
  const set = SET_REQUIREMENT.exec(text);
  if (set) {
    const values = (set[3] as string).split(",").map((v) => v.trim());
    return checked(text, set[1] as string, set[2] as "in" | "notin", values);
  }
  const equality = EQUALITY_REQUIREMENT.exec(text);
  if (equality) {
    const op = equality[2] === "==" ? "=" : (equality[2] as "=" | "!=" | ">" | "<");
    return checked(text, equality[1] as string, op, [(equality[3] as string).trim()]);
  }
  if (text.startsWith("!")) return checked(text, text.slice(1).trim(), "not-exists", []);
  return checked(text, text, "exists", []);
}

function checked(
  text: string,
  key: string,
  operator: SelectorRequirement["operator"],
  values: string[],
): SelectorRequirement | { problem: string } {
  const keyProblem = qualifiedNameProblem(key);
  if (keyProblem !== null) return { problem: `requirement ${JSON.stringify(text)}: key ${keyProblem}` };
  for (const value of values) {
    const problem =
      operator === ">" || operator === "<"
        ? /^-?\d+$/.test(value)
          ? null
          : "must be an integer"
        : labelValueProblem(value);
    if (problem !== null) {
      return { problem: `requirement ${JSON.stringify(text)}: value ${JSON.stringify(value)} ${problem}` };
    }
  }
  return { key, operator, values };
}
