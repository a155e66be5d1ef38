// What the publisher writes and where. Validated in one pass so an operator sees every
// problem at once, each naming its field; the CLI's config module folds these problems into
// its own list (passing `fieldName` to name them as its flags or variables).

import { PEER_SELECTOR_LABELS, POD_CONTRACT } from "../shared/pod-contract.ts";
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
  /**
   * The pod's uid (downward API metadata.uid, POD_UID): the publisher writes to this pod only, never
   * to a later pod of the same name. null: the uid of the pod as first read stands for it.
   */
  podUid: string | null;
  roleLabel: string;
  leaderValue: string;
  followerValue: string;
  fenceAnnotation: string;
  holderAnnotation: string;
  leaseAnnotation: string;
  leaderClusterAnnotation: string;
  conditionType: string;
  /**
   * The Kubernetes cluster this pod runs in, when pods of several clusters campaign for the lease;
   * null otherwise. With it, followers take a stale leader label off the pods of their own cluster
   * once the lease is held in another one (a new leader reaches only its own cluster's API server).
   */
  clusterName: string | null;
  /** The configured selector of the pods competing for the lease; null when none is (see demotePeers). */
  peerSelector: string | null;
  /**
   * Whether a new leader demotes peers still labelled leader. False only when the input's
   * peerSelector was null: the operator opted out. Otherwise peers are found by peerSelector or,
   * without one, by the pod's own PEER_SELECTOR_LABELS; a pod with neither is a configuration error.
   */
  demotePeers: boolean;
  resyncIntervalMs: number;
}

export type PublishConfigField = keyof PublishConfig;

// The not-campaigning and superseded-by annotations are not configurable: the pods of a lease
// write and read them on each other.
const {
  notCampaigningAnnotation: _notConfigurable,
  supersededAnnotation: _writtenByPeers,
  ...RENAMEABLE
} = POD_CONTRACT;

export const PUBLISH_DEFAULTS = {
  ...RENAMEABLE,
  podUid: null,
  clusterName: null,
  peerSelector: null,
  demotePeers: true,
  // How often the pod is re-read while no watch streams (a Role without watch, a server refusing
  // it); a streaming watch sees every change and resumes without a gap, so it needs none.
  resyncIntervalMs: 300_000,
} as const satisfies Omit<PublishConfig, "namespace" | "podName">;

/**
 * peerSelector: a selector; null to opt out of peer demotion; left out to build it from the pod's
 * labels. clusterName: null or left out when the lease is campaigned for in one cluster only.
 */
export type PublishConfigInput = { [K in Exclude<PublishConfigField, "demotePeers">]?: unknown };

/** A setting that cannot work with this pod; the message names the field and the fix. */
export class PublishConfigError extends Error {
  readonly field: PublishConfigField;

  constructor(field: PublishConfigField, message: string) {
    super(message);
    this.name = "PublishConfigError";
    this.field = field;
  }
}

type Check = (value: string) => string | null;
type FieldName = (field: PublishConfigField) => string;

/** Each text field: its default (none: required), its syntax check and what it is, for messages. */
const TEXT_FIELDS = {
  namespace: [undefined, dnsLabelProblem, "the pod's namespace, e.g. from POD_NAMESPACE"],
  podName: [undefined, dnsSubdomainProblem, "the pod's name, e.g. from POD_NAME"],
  roleLabel: [PUBLISH_DEFAULTS.roleLabel, qualifiedNameProblem, "a label key"],
  leaderValue: [PUBLISH_DEFAULTS.leaderValue, nonEmptyLabelValue, "a label value"],
  followerValue: [PUBLISH_DEFAULTS.followerValue, nonEmptyLabelValue, "a label value"],
  fenceAnnotation: [PUBLISH_DEFAULTS.fenceAnnotation, qualifiedNameProblem, "an annotation key"],
  holderAnnotation: [PUBLISH_DEFAULTS.holderAnnotation, qualifiedNameProblem, "an annotation key"],
  leaseAnnotation: [PUBLISH_DEFAULTS.leaseAnnotation, qualifiedNameProblem, "an annotation key"],
  leaderClusterAnnotation: [
    PUBLISH_DEFAULTS.leaderClusterAnnotation,
    qualifiedNameProblem,
    "an annotation key",
  ],
  conditionType: [PUBLISH_DEFAULTS.conditionType, qualifiedNameProblem, "a pod condition type"],
} as const satisfies Partial<Record<PublishConfigField, readonly [string | undefined, Check, string]>>;

type TextField = keyof typeof TEXT_FIELDS;

export function validatePublishConfig(
  input: PublishConfigInput,
  fieldName: FieldName = (field) => field,
): { config: PublishConfig } | { problems: string[] } {
  const problems: string[] = [];
  const text = textReader(input, fieldName, problems);
  const names = Object.fromEntries(
    Object.entries(TEXT_FIELDS).map(([field, [fallback, check, what]]) => [
      field,
      text(field as TextField, fallback, check, what),
    ]),
  ) as Record<TextField, string>;
  const config: PublishConfig = {
    ...names,
    podUid: null,
    clusterName: null,
    peerSelector: null,
    demotePeers: input.peerSelector !== null,
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
  if (input.clusterName !== undefined && input.clusterName !== null) {
    config.clusterName = text(
      "clusterName",
      undefined,
      nonEmptyLabelValue,
      "a name for this cluster, a label value",
    );
  }
  if (input.podUid !== undefined && input.podUid !== null) {
    config.podUid = text("podUid", undefined, nonEmpty, "the pod's uid, e.g. from POD_UID");
  }
  const resync = input.resyncIntervalMs ?? PUBLISH_DEFAULTS.resyncIntervalMs;
  if (typeof resync !== "number" || !Number.isInteger(resync) || resync <= 0) {
    problems.push(
      `${fieldName("resyncIntervalMs")} must be a positive whole number of milliseconds, got ${JSON.stringify(resync)}`,
    );
  } else {
    config.resyncIntervalMs = resync;
  }
  problems.push(...clashes(config, fieldName));
  return problems.length > 0 ? { problems } : { config };
}

/** Reads one text field, adding any problem to `problems`; "" stands in for a value that is unusable. */
function textReader(input: PublishConfigInput, fieldName: FieldName, problems: string[]) {
  return (field: keyof PublishConfigInput, fallback: string | undefined, check: Check, what: string) => {
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
}

/** Values valid one by one that cannot work together. */
function clashes(config: PublishConfig, fieldName: FieldName): string[] {
  const problems: string[] = [];
  if (config.leaderValue !== "" && config.leaderValue === config.followerValue) {
    problems.push(
      `${fieldName("leaderValue")} and ${fieldName("followerValue")} are both ${JSON.stringify(config.leaderValue)}: a Service could not tell the leader apart`,
    );
  }
  const annotationFields = [
    "fenceAnnotation",
    "holderAnnotation",
    "leaseAnnotation",
    "leaderClusterAnnotation",
  ] as const;
  for (const [i, a] of annotationFields.entries()) {
    for (const b of annotationFields.slice(i + 1)) {
      if (config[a] !== "" && config[a] === config[b]) {
        problems.push(
          `${fieldName(a)} and ${fieldName(b)} are both ${JSON.stringify(config[a])}: use distinct keys`,
        );
      }
    }
  }
  return problems;
}

function nonEmpty(value: string): string | null {
  return value.trim() === "" ? "must not be empty" : null;
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
 * PEER_SELECTOR_LABELS, whichever it has; null when it has neither.
 */
export function defaultPeerSelector(podLabels: Record<string, string> | undefined): string | null {
  const parts = PEER_SELECTOR_LABELS.filter((key) => podLabels?.[key] !== undefined).map(
    (key) => `${key}=${podLabels?.[key]}`,
  );
  return parts.length > 0 ? parts.join(",") : null;
}

/**
 * The selector a new leader lists its peers with; null when the operator opted out. Throws a
 * PublishConfigError when there is none to use: without it a stale leader label on another pod
 * would stay, and a Service would send traffic to two pods.
 */
export function peerSelectorFor(
  config: PublishConfig,
  podLabels: Record<string, string> | undefined,
): string | null {
  if (!config.demotePeers) return null;
  const selector = config.peerSelector ?? defaultPeerSelector(podLabels);
  if (selector !== null) return selector;
  throw new PublishConfigError(
    "peerSelector",
    `peerSelector is not set and pod ${config.podName} has neither ${PEER_SELECTOR_LABELS.join(" nor ")} label to build it from, ` +
      "so a new leader could not take a stale leader label off another pod: " +
      "set peerSelector to the selector of the pods competing for the lease (the workload's selector, never the role label), " +
      "or to null to opt out of demoting stale leaders",
  );
}
