import { isJsonObject } from "./patch/json-value.ts";
import type { FieldError } from "./status-errors.ts";

// Wording below follows apimachinery's validation package so messages match what a real cluster says.

const QUALIFIED_NAME_FORMAT = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]";
const QUALIFIED_NAME = new RegExp(`^${QUALIFIED_NAME_FORMAT}$`);
const QUALIFIED_NAME_MESSAGE =
  "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character";
const LABEL_VALUE_FORMAT = "(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?";
const LABEL_VALUE = new RegExp(`^${LABEL_VALUE_FORMAT}$`);
const LABEL_VALUE_MESSAGE =
  "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character";
const DNS1123_SUBDOMAIN_FORMAT = "[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*";
const DNS1123_SUBDOMAIN = new RegExp(`^${DNS1123_SUBDOMAIN_FORMAT}$`);
const DNS1123_SUBDOMAIN_MESSAGE =
  "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character";

export const LABEL_VALUE_MAX_LENGTH = 63;
export const QUALIFIED_NAME_MAX_LENGTH = 63;
export const DNS1123_SUBDOMAIN_MAX_LENGTH = 253;
export const ANNOTATIONS_MAX_BYTES = 256 * 1024;

function regexError(message: string, format: string, ...examples: string[]): string {
  return `${message} (e.g. ${examples.map((e) => `'${e}', `).join(" or ")}regex used for validation is '${format}')`;
}

function maxLength(n: number): string {
  return `must be no more than ${n} characters`;
}

export function dns1123SubdomainErrors(value: string): string[] {
  const errors: string[] = [];
  if (value.length > DNS1123_SUBDOMAIN_MAX_LENGTH) errors.push(maxLength(DNS1123_SUBDOMAIN_MAX_LENGTH));
  if (!DNS1123_SUBDOMAIN.test(value)) {
    errors.push(regexError(DNS1123_SUBDOMAIN_MESSAGE, DNS1123_SUBDOMAIN_FORMAT, "example.com"));
  }
  return errors;
}

/** A label or annotation key: `name` or `dns.subdomain/name`. */
export function qualifiedNameErrors(value: string): string[] {
  const parts = value.split("/");
  const nameExample = ["MyName", "my.name", "123-abc"];
  if (parts.length > 2) {
    return [
      `a qualified name ${regexError(QUALIFIED_NAME_MESSAGE, QUALIFIED_NAME_FORMAT, ...nameExample)} with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')`,
    ];
  }
  const errors: string[] = [];
  const name = parts.at(-1) ?? "";
  if (parts.length === 2) {
    const prefix = parts[0] ?? "";
    if (prefix === "") errors.push("prefix part must be non-empty");
    else errors.push(...dns1123SubdomainErrors(prefix).map((e) => `prefix part ${e}`));
  }
  if (name === "") errors.push("name part must be non-empty");
  else if (name.length > QUALIFIED_NAME_MAX_LENGTH)
    errors.push(`name part ${maxLength(QUALIFIED_NAME_MAX_LENGTH)}`);
  if (!QUALIFIED_NAME.test(name)) {
    errors.push(`name part ${regexError(QUALIFIED_NAME_MESSAGE, QUALIFIED_NAME_FORMAT, ...nameExample)}`);
  }
  return errors;
}

export function labelValueErrors(value: string): string[] {
  const errors: string[] = [];
  if (value.length > LABEL_VALUE_MAX_LENGTH) errors.push(maxLength(LABEL_VALUE_MAX_LENGTH));
  if (!LABEL_VALUE.test(value))
    errors.push(regexError(LABEL_VALUE_MESSAGE, LABEL_VALUE_FORMAT, "MyValue", "my_value", "12345"));
  return errors;
}

function invalidEach(field: string, value: string, details: string[]): FieldError[] {
  return details.map((detail) => ({ type: "FieldValueInvalid", field, value, detail }));
}

/**
 * Labels and annotations must be string maps; the real server rejects anything else while decoding (400),
 * so this returns a decode error message rather than a field error.
 */
export function stringMapDecodeError(value: unknown, field: string): string | undefined {
  if (value === undefined || value === null) return undefined;
  if (!isJsonObject(value))
    return `json: cannot unmarshal ${typeof value} into Go struct field ObjectMeta.${field} of type map[string]string`;
  for (const [k, v] of Object.entries(value)) {
    if (typeof v !== "string")
      return `json: cannot unmarshal ${typeof v} into Go struct field ObjectMeta.${field} of type string (key ${JSON.stringify(k)})`;
  }
  return undefined;
}

export function labelErrors(labels: Record<string, string> | undefined): FieldError[] {
  return Object.entries(labels ?? {}).flatMap(([k, v]) => [
    ...invalidEach("metadata.labels", k, qualifiedNameErrors(k)),
    ...invalidEach("metadata.labels", v, labelValueErrors(v)),
  ]);
}

export function annotationErrors(annotations: Record<string, string> | undefined): FieldError[] {
  const entries = Object.entries(annotations ?? {});
  const errors = entries.flatMap(([k]) =>
    invalidEach("metadata.annotations", k, qualifiedNameErrors(k.toLowerCase())),
  );
  const bytes = entries.reduce((sum, [k, v]) => sum + Buffer.byteLength(k) + Buffer.byteLength(v), 0);
  if (bytes > ANNOTATIONS_MAX_BYTES) {
    errors.push({
      type: "FieldValueTooLong",
      field: "metadata.annotations",
      detail: `must have at most ${ANNOTATIONS_MAX_BYTES} bytes`,
    });
  }
  return errors;
}

export function nameErrors(name: string): FieldError[] {
  return invalidEach("metadata.name", name, dns1123SubdomainErrors(name));
}
