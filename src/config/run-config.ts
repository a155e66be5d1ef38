// The configuration of `pglease run`, read once from flags and environment, validated once,
// every problem reported together (exit code 2), nothing silently adjusted.
import { resolveTiming, type Timing } from "../election/timing.ts";
import { decidePublishing, type PublishingDecision } from "../kube/environment.ts";
import { type PublishConfigField, validatePublishConfig } from "../kube/publish-config.ts";
import { DEFAULT_RETENTION, type HistoryRetention, MAX_HISTORY_ROWS } from "../postgres/history-store.ts";
import { type DatabaseConfig, readDatabaseConfig } from "./database.ts";
import { type HealthConfig, readHealthConfig } from "./health-config.ts";
import { noArguments, optionReader, type RawOptions, readOptions, UsageError } from "./options.ts";
import { RUN_OPTIONS } from "./run-options.ts";
import {
  type Address,
  type LogLevel,
  type Parsed,
  parseAddress,
  parseBoolean,
  parseDuration,
  parseInteger,
  parseLeaseNames,
  parseLogLevel,
} from "./values.ts";

export interface RunConfig {
  leases: string[];
  publishLease: string;
  timing: Timing;
  http: Address;
  notify: boolean;
  migrate: boolean;
  poolSize: number;
  database: DatabaseConfig;
  history: HistoryRetention;
  /** --cluster-name: where this pod runs when several clusters campaign; null for one cluster. */
  clusterName: string | null;
  publish: {
    roleLabel: string;
    conditionType: string;
    fenceAnnotation: string;
    holderAnnotation: string;
    leaseAnnotation: string;
    peerSelector: string | null;
    /** False with --no-peer-demotion: no pod but this one is ever demoted. */
    peerDemotion: boolean;
  };
  gracePeriodMs: number;
  startTimeoutMs: number;
  logLevel: LogLevel;
  /**
   * POD_UID from the downward API scopes the restart lock to this pod; the revision (POD_REVISION,
   * or the pod-template-hash / controller-revision-hash label the chart passes) shows with its candidacy.
   */
  pod: {
    name: string | undefined;
    namespace: string | undefined;
    uid: string | undefined;
    revision: string | undefined;
  };
  /** --priority, --preempt, --no-lead: see src/candidacy. */
  candidacy: { priority: number; preempt: boolean; noLead: boolean };
  restartTakeover: boolean;
  sessionTakeover: boolean;
  /**
   * --crash-takeover: this process writes its holder to `messagePath` (the container's termination
   * message file), and as a follower takes a live lease whose holder the kubelet reported terminated.
   */
  crashTakeover: { enabled: boolean; messagePath: string };
  /** Whether this process publishes to its pod, decided from the environment once, here. */
  publishing: PublishingDecision;
  /** Leadership follows the application's health (the health gate). */
  health: HealthConfig;
}

const TIMING_FLAGS: Record<keyof Timing, string> = {
  leaseDurationMs: "--duration",
  renewIntervalMs: "--renew-interval",
  retryIntervalMs: "--retry-interval",
  safetyMarginMs: "--safety-margin",
  callTimeoutMs: "--statement-timeout",
  transientRetryMs: "the transient retry pause",
};

const PUBLISH_FLAGS: Partial<Record<PublishConfigField, string>> = {
  roleLabel: "--role-label",
  conditionType: "--condition-type",
  fenceAnnotation: "--fence-annotation",
  holderAnnotation: "--holder-annotation",
  leaseAnnotation: "--lease-annotation",
  peerSelector: "--peer-selector",
  clusterName: "--cluster-name",
  namespace: "POD_NAMESPACE",
  podName: "POD_NAME",
};

function parsePath(text: string): Parsed<string> {
  return text.startsWith("/")
    ? { value: text }
    : { problem: `${JSON.stringify(text)} is not an absolute path (the container's terminationMessagePath)` };
}

/** Reads and validates; throws UsageError listing every problem. */
export function readRunConfig(argv: readonly string[], env: NodeJS.ProcessEnv): RunConfig {
  const raw = readOptions(RUN_OPTIONS, argv, env);
  const problems = [...raw.problems];
  noArguments("run", raw, problems);
  const get = optionReader(raw, problems);

  const leases = get("lease", parseLeaseNames);
  if (!raw.values.has("lease") && !raw.misspelt.has("lease"))
    problems.push("--lease (PGLEASE_LEASE) is required: name the lease(s), e.g. --lease orders-sync");
  const publishLease = raw.values.get("publish-lease")?.text ?? leases?.[0] ?? "";
  if (leases && !leases.includes(publishLease)) {
    problems.push(
      `--publish-lease ${JSON.stringify(publishLease)} is not one of the leases given with --lease`,
    );
  }

  const timing = readTiming(raw, get, problems);
  const { clusterName, ...publish } = readPublish(
    raw,
    env,
    problems,
    get("peer-demotion", parseBoolean) ?? true,
  );
  const database = readDatabaseConfig(raw, env, problems);
  const publishing = decidePublishing(env);
  const config: RunConfig = {
    leases: leases ?? [],
    publishLease,
    timing,
    http: get("http-addr", parseAddress) ?? { host: "::", port: 8484 },
    notify: get("notify", parseBoolean) ?? true,
    migrate: get("migrate", parseBoolean) ?? true,
    poolSize: get("pool-size", (t) => parseInteger(t, 1, 100)) ?? 4,
    database,
    history: {
      maxAgeMs: get("history-max-age", parseDuration) ?? DEFAULT_RETENTION.maxAgeMs,
      maxRowsPerKey:
        get("history-max-rows", (t) => parseInteger(t, 1, MAX_HISTORY_ROWS)) ??
        DEFAULT_RETENTION.maxRowsPerKey,
    },
    clusterName,
    publish,
    gracePeriodMs: get("grace-period", parseDuration) ?? 20_000,
    startTimeoutMs: get("start-timeout", parseDuration) ?? 60_000,
    logLevel: get("log-level", parseLogLevel) ?? "info",
    pod: {
      name: env.POD_NAME?.trim() || undefined,
      namespace: env.POD_NAMESPACE?.trim() || undefined,
      uid: env.POD_UID?.trim() || undefined,
      // The chart sets both labels' variables; the workload's controller sets one of the labels.
      revision:
        env.POD_REVISION?.trim() ||
        env.POD_TEMPLATE_HASH?.trim() ||
        env.CONTROLLER_REVISION_HASH?.trim() ||
        undefined,
    },
    candidacy: {
      priority: get("priority", (t) => parseInteger(t, 0, 1000)) ?? 0,
      preempt: get("preempt", parseBoolean) ?? false,
      noLead: get("no-lead", parseBoolean) ?? false,
    },
    restartTakeover: get("restart-takeover", parseBoolean) ?? true,
    sessionTakeover: get("session-takeover", parseBoolean) ?? false,
    crashTakeover: {
      enabled: get("crash-takeover", parseBoolean) ?? false,
      messagePath: get("termination-message-path", parsePath) ?? "/dev/termination-log",
    },
    publishing,
    health: readHealthConfig(raw, get, problems, timing, publishing),
  };
  if (config.sessionTakeover && !config.notify) {
    problems.push(
      "--session-takeover needs --notify: the notice session is what a holder records; drop --no-notify or --session-takeover",
    );
  }
  if (config.candidacy.preempt && config.candidacy.noLead) {
    problems.push(
      "--preempt and --no-lead contradict each other: a process that never leads cannot preempt; give one of them",
    );
  }
  if (problems.length > 0) throw new UsageError(problems);
  return config;
}

function readTiming(
  raw: RawOptions,
  get: <T>(flag: string, parse: (text: string) => Parsed<T>) => T | undefined,
  problems: string[],
): Timing {
  const before = problems.length;
  const input = {
    leaseDurationMs: get("duration", parseDuration),
    renewIntervalMs: get("renew-interval", parseDuration),
    retryIntervalMs: get("retry-interval", parseDuration),
    safetyMarginMs: get("safety-margin", parseDuration),
    callTimeoutMs: get("statement-timeout", parseDuration),
  };
  const defined = Object.fromEntries(Object.entries(input).filter(([, v]) => v !== undefined));
  const resolved = resolveTiming(defined, (field) => {
    const flag = TIMING_FLAGS[field];
    const source = raw.values.get(flag.slice(2))?.source;
    return source && source !== flag ? `${flag} (${source})` : flag;
  });
  // Consistency is only worth reporting once each value parsed.
  if (problems.length === before) problems.push(...resolved.problems);
  return resolved.timing;
}

function readPublish(
  raw: RawOptions,
  env: NodeJS.ProcessEnv,
  problems: string[],
  peerDemotion: boolean,
): RunConfig["publish"] & { clusterName: string | null } {
  const text = (flag: string) => raw.values.get(flag)?.text;
  if (!peerDemotion && text("peer-selector") !== undefined) {
    problems.push("--peer-selector and --no-peer-demotion contradict each other: give one of them");
  }
  const result = validatePublishConfig(
    {
      // Checked here too, so a mistake shows before the pod exists; placeholders outside a cluster.
      namespace: env.POD_NAMESPACE?.trim() || "default",
      podName: env.POD_NAME?.trim() || "local",
      roleLabel: text("role-label"),
      conditionType: text("condition-type"),
      fenceAnnotation: text("fence-annotation"),
      holderAnnotation: text("holder-annotation"),
      leaseAnnotation: text("lease-annotation"),
      peerSelector: text("peer-selector"),
      clusterName: text("cluster-name"),
    },
    (field) => {
      const flag = PUBLISH_FLAGS[field] ?? field;
      const source = flag.startsWith("--") ? raw.values.get(flag.slice(2))?.source : undefined;
      return source && source !== flag ? `${flag} (${source})` : flag;
    },
  );
  if ("problems" in result) {
    problems.push(...result.problems);
    return {
      roleLabel: "",
      conditionType: "",
      fenceAnnotation: "",
      holderAnnotation: "",
      leaseAnnotation: "",
      peerSelector: null,
      peerDemotion,
      clusterName: null,
    };
  }
  const c = result.config;
  return {
    roleLabel: c.roleLabel,
    conditionType: c.conditionType,
    fenceAnnotation: c.fenceAnnotation,
    holderAnnotation: c.holderAnnotation,
    leaseAnnotation: c.leaseAnnotation,
    peerSelector: c.peerSelector,
    peerDemotion,
    clusterName: c.clusterName,
  };
}
