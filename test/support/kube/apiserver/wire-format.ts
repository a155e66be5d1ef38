import { isJsonObject, type JsonObject } from "./patch/json-value.ts";
import { badRequest } from "./status-errors.ts";

/** metav1.Time fields: the real server keeps whole seconds, so a client sending milliseconds reads back less. */
const TIME_FIELDS = new Set([
  "creationTimestamp",
  "deletionTimestamp",
  "lastTransitionTime",
  "lastProbeTime",
  "startTime",
  "startedAt",
  "finishedAt",
  "firstTimestamp",
  "lastTimestamp",
  "deprecatedFirstTimestamp",
  "deprecatedLastTimestamp",
  "lastObservedTime",
]);

/** metav1.MicroTime fields keep microseconds. */
const MICRO_TIME_FIELDS = new Set(["eventTime"]);

function parseTime(field: string, value: unknown): Date {
  const date = typeof value === "string" ? new Date(value) : new Date(Number.NaN);
  if (typeof value !== "string" || Number.isNaN(date.getTime()) || !/^\d{4}-\d{2}-\d{2}T/.test(value)) {
    throw badRequest(
      `${field}: parsing time ${JSON.stringify(value)} as "2006-01-02T15:04:05Z07:00": cannot parse`,
    );
  }
  return date;
}

/** Rewrites every timestamp the way kube-apiserver would serialise it back (RFC 3339, UTC). */
export function normalizeTimes(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(normalizeTimes);
  if (!isJsonObject(value)) return value;
  const result: JsonObject = {};
  for (const [key, child] of Object.entries(value)) {
    if (child !== null && child !== undefined && TIME_FIELDS.has(key)) {
      result[key] = `${parseTime(key, child).toISOString().slice(0, 19)}Z`;
    } else if (child !== null && child !== undefined && MICRO_TIME_FIELDS.has(key)) {
      result[key] = `${parseTime(key, child).toISOString().slice(0, 23)}000Z`;
    } else {
      result[key] = normalizeTimes(child);
    }
  }
  return result;
}

export function parseJsonBody(body: string): unknown {
  try {
    return JSON.parse(body);
  } catch (error) {
    throw badRequest(`the request body could not be decoded: ${(error as Error).message}`);
  }
}

export function withKind(object: JsonObject, apiVersion: string, kind: string): JsonObject {
  return { kind, apiVersion, ...object };
}
