// Kubernetes answers every failure with a metav1.Status object; clients (and our code) branch on
// `code` and `reason`, so these mirror the real server's wording closely.

export interface StatusCause {
  reason: string;
  message: string;
  field?: string;
}

export interface StatusDetails {
  name?: string;
  group?: string;
  kind?: string;
  causes?: StatusCause[];
  retryAfterSeconds?: number;
}

export interface StatusBody {
  kind: "Status";
  apiVersion: "v1";
  metadata: Record<string, never>;
  status: "Failure";
  message: string;
  reason: string;
  details?: StatusDetails;
  code: number;
}

export class ApiError extends Error {
  readonly code: number;
  readonly reason: string;
  readonly details: StatusDetails | undefined;
  readonly headers: Record<string, string>;

  constructor(
    code: number,
    reason: string,
    message: string,
    details?: StatusDetails,
    headers: Record<string, string> = {},
  ) {
    super(message);
    this.code = code;
    this.reason = reason;
    this.details = details;
    this.headers = headers;
  }

  toStatus(): StatusBody {
    const body: StatusBody = {
      kind: "Status",
      apiVersion: "v1",
      metadata: {},
      status: "Failure",
      message: this.message,
      reason: this.reason,
      code: this.code,
    };
    if (this.details !== undefined) body.details = this.details;
    return body;
  }
}

/**
 * A failure a watch gets the way kube-apiserver reports one after the watch began (a version too
 * old, 410 Expired; an internal error): status 200, then one ERROR event carrying the Status.
 */
export class WatchErrorEvent extends ApiError {}

/** `pods` for the core group, `events.events.k8s.io` otherwise, as the real server qualifies them. */
export function qualifiedResource(group: string, resource: string): string {
  return group === "" ? resource : `${resource}.${group}`;
}

function describe(group: string, resource: string, name: string | undefined): string {
  const qualified = qualifiedResource(group, resource);
  return name ? `${qualified} "${name}"` : qualified;
}

function details(group: string, resource: string, name: string | undefined): StatusDetails {
  const d: StatusDetails = { kind: resource };
  if (name) d.name = name;
  if (group !== "") d.group = group;
  return d;
}

export function notFound(group: string, resource: string, name: string): ApiError {
  return new ApiError(
    404,
    "NotFound",
    `${describe(group, resource, name)} not found`,
    details(group, resource, name),
  );
}

export function routeNotFound(): ApiError {
  return new ApiError(404, "NotFound", "the server could not find the requested resource", {});
}

export function alreadyExists(group: string, resource: string, name: string): ApiError {
  return new ApiError(
    409,
    "AlreadyExists",
    `${describe(group, resource, name)} already exists`,
    details(group, resource, name),
  );
}

export function conflict(group: string, resource: string, name: string, why: string): ApiError {
  return new ApiError(
    409,
    "Conflict",
    `Operation cannot be fulfilled on ${describe(group, resource, name)}: ${why}`,
    details(group, resource, name),
  );
}

export const STALE_OBJECT =
  "the object has been modified; please apply your changes to the latest version and try again";

export function forbidden(group: string, resource: string, name: string | undefined, why: string): ApiError {
  return new ApiError(
    403,
    "Forbidden",
    `${describe(group, resource, name)} is forbidden: ${why}`,
    details(group, resource, name),
  );
}

export function unauthorized(): ApiError {
  return new ApiError(401, "Unauthorized", "Unauthorized");
}

export function badRequest(message: string): ApiError {
  return new ApiError(400, "BadRequest", message);
}

export function methodNotAllowed(method: string): ApiError {
  return new ApiError(
    405,
    "MethodNotAllowed",
    `the server does not allow this method on the requested resource (${method})`,
  );
}

export function unsupportedMediaType(message: string): ApiError {
  return new ApiError(415, "UnsupportedMediaType", message);
}

export function gone(message: string): ApiError {
  return new ApiError(410, "Expired", message);
}

export interface FieldError {
  type: "FieldValueInvalid" | "FieldValueRequired" | "FieldValueTooLong" | "FieldValueForbidden";
  field: string;
  value?: string;
  detail: string;
}

function describeFieldError(e: FieldError): string {
  switch (e.type) {
    case "FieldValueInvalid":
      return `Invalid value: ${JSON.stringify(e.value ?? "")}: ${e.detail}`;
    case "FieldValueRequired":
      return `Required value: ${e.detail}`;
    case "FieldValueTooLong":
      return `Too long: ${e.detail}`;
    case "FieldValueForbidden":
      return `Forbidden: ${e.detail}`;
  }
}

/**
 * 422 with one cause per field error, worded like apimachinery's field.ErrorList: its message
 * (ErrorList.ToAggregate) says each distinct error once, its causes list every one.
 */
export function invalid(kind: string, name: string, errors: FieldError[]): ApiError {
  const lines = [...new Set(errors.map((e) => `${e.field}: ${describeFieldError(e)}`))];
  const summary = lines.length === 1 ? lines[0] : `[${lines.join(", ")}]`;
  return new ApiError(422, "Invalid", `${kind} "${name}" is invalid: ${summary}`, {
    name,
    kind,
    causes: errors.map((e) => ({ reason: e.type, message: describeFieldError(e), field: e.field })),
  });
}

/** A failure the real server reports with a generic 422 (e.g. a JSON patch `test` op that fails). */
export function unprocessable(message: string): ApiError {
  return new ApiError(422, "Invalid", message);
}

const REASON_BY_CODE: Record<number, string> = {
  400: "BadRequest",
  401: "Unauthorized",
  403: "Forbidden",
  404: "NotFound",
  409: "Conflict",
  410: "Expired",
  429: "TooManyRequests",
  500: "InternalError",
  503: "ServiceUnavailable",
  504: "Timeout",
};

/** A failure injected by a test: shaped like what the real server (or a proxy in front) sends. */
export function injected(
  code: number,
  message: string | undefined,
  retryAfterSeconds?: number,
  asWatchEvent = false,
): ApiError {
  const reason = REASON_BY_CODE[code] ?? "Unknown";
  const headers: Record<string, string> = {};
  const d: StatusDetails = {};
  if (retryAfterSeconds !== undefined) {
    headers["Retry-After"] = String(retryAfterSeconds);
    d.retryAfterSeconds = retryAfterSeconds;
  }
  const As = asWatchEvent ? WatchErrorEvent : ApiError;
  return new As(code, reason, message ?? `injected fault: ${reason}`, d, headers);
}
