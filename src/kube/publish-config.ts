// What the publisher writes and where. Validated in one pass so an operator sees every
// problem at once, each naming its field; the CLI's config module folds these problems into
// its own list (passing `fieldName` to name them as its flags or variables).
import {
  dnsLabelProblem,
  dnsSubdomainProblem,
  labelValueProblem,
  parseLabelSelector,
  qualifiedNameProblem,
} from "./kubernetes-syntax.ts";

export interface PublishConfig {
  namespace: string;
  podName: string;
  roleLabel: string;
  leaderValue: string;
  followerValue: string;
  fenceAnnotation: string;
  holderAnnotation: string;
  leaseAnnotation: string;
  conditionType: string;
  /** null: built at start from the pod's own app.kubernetes.io/name and /instance labels. */
  peerSelector: string | null;
  resyncIntervalMs: number;
}

export type PublishConfigField = keyof PublishConfig;

export const PUBLISH_DEFAULTS = {
  roleLabel: "pglease.io/role",
  leaderValue: "leader",
  followerValue: "follower",
  fenceAnnotation: "pglease.io/fence",
  holderAnnotation: "pglease.io/holder",
  leaseAnnotation: "pglease.io/lease",
  conditionType: "pglease.io/leader",
  peerSelector: null,
  // A safety net behind the watch, which already restores hand-made changes at once.
  resyncIntervalMs: 300_000,
} as const satisfies Omit<PublishConfig, "namespace" | "podName">;

export type PublishConfigInput = { [K in PublishConfigField]?: unknown };

type Check = (value: string) => string | null;

export function validatePublishConfig(
  input: PublishConfigInput,
  fieldName: (field: PublishConfigField) => string = (field) => field,
): { config: PublishConfig } | { problems: string[] } {
  const problems: string[] = [];
  const text = (field: PublishConfigField, fallback: string | undefined, check: Check, what: string) => {
    const value = input[field] ?? fallback;
    if (value === undefined) {
      problems.push(`${fieldName(field)} is required (${what})`);
      return "";
    }
    if (typeof value !== "string") {
      problems.push(`${fieldName(field)} must be a string (${what}), got ${typeof value}`);
      return "";
    }
    const problem = check(value);
    if (problem !== null) problems.push(`${fieldName(field)} ${JSON.stringify(value)} ${problem} (${what})`);
    return value;
  };

  const config: PublishConfig = {
    namespace: text("namespace", undefined, dnsLabelProblem, "the pod's namespace, e.g. from POD_NAMESPACE"),
    podName: text("podName", undefined, dnsSubdomainProblem, "the pod's name, e.g. from POD_NAME"),
    roleLabel: text("roleLabel", PUBLISH_DEFAULTS.roleLabel, qualifiedNameProblem, "a label key"),
    leaderValue: text("leaderValue", PUBLISH_DEFAULTS.leaderValue, nonEmptyLabelValue, "a label value"),
    followerValue: text("followerValue", PUBLISH_DEFAULTS.followerValue, nonEmptyLabelValue, "a label value"),
    fenceAnnotation: text(
      "fenceAnnotation",
      PUBLISH_DEFAULTS.fenceAnnotation,
      qualifiedNameProblem,
      "an annotation key",
    ),
    holderAnnotation: text(
      "holderAnnotation",
      PUBLISH_DEFAULTS.holderAnnotation,
      qualifiedNameProblem,
      "an annotation key",
    ),
    leaseAnnotation: text(
      "leaseAnnotation",
      PUBLISH_DEFAULTS.leaseAnnotation,
      qualifiedNameProblem,
      "an annotation key",
    ),
    conditionType: text(
      "conditionType",
      PUBLISH_DEFAULTS.conditionType,
      qualifiedNameProblem,
      "a pod condition type",
    ),
    peerSelector: null,
    resyncIntervalMs: PUBLISH_DEFAULTS.resyncIntervalMs,
  };

  if (input.peerSelector !== undefined && input.peerSelector !== null) {
    config.peerSelector = text(
      "peerSelector",
      undefined,
      selectorProblem(config.roleLabel),
      "a label selector",
    );
  }

  const resync = input.resyncIntervalMs ?? PUBLISH_DEFAULTS.resyncIntervalMs;
  if (typeof resync !== "number" || !Number.isInteger(resync) || resync <= 0) {
    problems.push(
      `${fieldName("resyncIntervalMs")} must be a positive whole number of milliseconds, got ${JSON.stringify(resync)}`,
    );
  } else {
    config.resyncIntervalMs = resync;
  }

  if (config.leaderValue !== "" && config.leaderValue === config.followerValue) {
    problems.push(
      `${fieldName("leaderValue")} and ${fieldName("followerValue")} are both ${JSON.stringify(config.leaderValue)}: a Service could not tell the leader apart`,
    );
  }
  const annotationFields = ["fenceAnnotation", "holderAnnotation", "leaseAnnotation"] as const;
  for (const [i, a] of annotationFields.entries()) {
    for (const b of annotationFields.slice(i + 1)) {
      if (config[a] !== "" && config[a] === config[b]) {
        problems.push(
          `${fieldName(a)} and ${fieldName(b)} are both ${JSON.stringify(config[a])}: use distinct keys`,
        );
      }
    }
  }

  return problems.length > 0 ? { problems } : { config };
}

function nonEmptyLabelValue(value: string): string | null {
  return value === "" ? "must not be empty" : labelValueProblem(value);
}

function selectorProblem(roleLabel: string): Check {
  return (value) => {
    const parsed = parseLabelSelector(value);
    if ("problem" in parsed) return parsed.problem;
    if (parsed.requirements.some((r) => r.key === roleLabel)) {
      return `must not select on the role label ${JSON.stringify(roleLabel)}: peers are found whatever their role`;
    }
    return null;
  };
}

/**
 * The selector that finds this pod's peers when none is configured: the pod's own
 * app.kubernetes.io/name and /instance labels, whichever it has; null when it has neither.
 */
export function defaultPeerSelector(podLabels: Record<string, string> | undefined): string | null {
  const parts = ["app.kubernetes.io/name", "app.kubernetes.io/instance"]
    .filter((key) => podLabels?.[key] !== undefined)
    .map((key) => `${key}=${podLabels?.[key]}`);
  return parts.length > 0 ? parts.join(",") : null;
}
