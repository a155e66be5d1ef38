// The health gate's flags (leadership follows the application's health): read and validated with
// the rest of `pglease run`, against its lease timing, every problem reported together.
import type { Timing } from "../election/timing.ts";
import type { PublishingDecision } from "../kube/environment.ts";
import type { OptionSpec, RawOptions } from "./options.ts";
import { type Parsed, parseBoolean, parseDuration } from "./values.ts";

export const HEALTH_OPTIONS: readonly OptionSpec[] = [
  {
    flag: "health-gate",
    env: "PGLEASE_HEALTH_GATE",
    value: "off|pod|url",
    help: "campaign only while the application is healthy: pod reads its containers' ready state from the pod's status (no extra API request), url probes --health-url",
    defaultText: "off, or url with --health-url; the chart sets pod",
  },
  {
    flag: "health-url",
    env: "PGLEASE_HEALTH_URL",
    value: "URL",
    help: "the application's health endpoint, probed by the sidecar: 2xx is healthy",
  },
  {
    flag: "health-interval",
    env: "PGLEASE_HEALTH_INTERVAL",
    value: "DURATION",
    help: "how often --health-url is probed (each probe times out after the same time)",
    defaultText: "1s",
  },
  {
    flag: "app-containers",
    env: "PGLEASE_APP_CONTAINERS",
    value: "NAME[,NAME…]",
    repeatable: true,
    help: "the application's containers judged by --health-gate pod",
    defaultText: "every container but --sidecar-container",
  },
  {
    flag: "sidecar-container",
    env: "PGLEASE_SIDECAR_CONTAINER",
    value: "NAME",
    help: "this sidecar's own container, never judged as the application",
    defaultText: "pglease",
  },
  {
    flag: "health-grace",
    env: "PGLEASE_HEALTH_GRACE",
    value: "DURATION",
    help: "a leader whose application stays unready this long hands over (at least the retry interval)",
    defaultText: "5s",
  },
  {
    flag: "health-settle",
    env: "PGLEASE_HEALTH_SETTLE",
    value: "DURATION",
    help: "after a health handover, campaign again only once the application has been ready this long (at least --health-grace)",
    defaultText: "30s",
  },
  {
    flag: "health-strict",
    env: "PGLEASE_HEALTH_STRICT",
    boolean: true,
    help: "hand over after the grace period even when no peer pod has a ready application (the lease may then have no leader)",
    defaultText: "false",
  },
  {
    flag: "health-wait",
    env: "PGLEASE_HEALTH_WAIT",
    boolean: true,
    help: "do not campaign at start until the application is ready (off: campaign at once)",
    defaultText: "true",
  },
];

export interface HealthConfig {
  source: "off" | "pod" | "url";
  url: URL | null;
  intervalMs: number;
  appContainers: string[] | null;
  sidecarContainer: string;
  graceMs: number;
  settleMs: number;
  strict: boolean;
  waitAtStart: boolean;
}

type Get = <T>(flag: string, parse: (text: string) => Parsed<T>) => T | undefined;

export function readHealthConfig(
  raw: RawOptions,
  get: Get,
  problems: string[],
  timing: Timing,
  publishing: PublishingDecision,
): HealthConfig {
  const url = get("health-url", parseHealthUrl) ?? null;
  const source = get("health-gate", parseSource) ?? (url ? "url" : "off");
  const config: HealthConfig = {
    source,
    url,
    intervalMs: get("health-interval", parseDuration) ?? 1_000,
    appContainers: get("app-containers", parseNames) ?? null,
    sidecarContainer: raw.values.get("sidecar-container")?.text.trim() || "pglease",
    graceMs: get("health-grace", parseDuration) ?? 5_000,
    settleMs: get("health-settle", parseDuration) ?? 30_000,
    strict: get("health-strict", parseBoolean) ?? false,
    waitAtStart: get("health-wait", parseBoolean) ?? true,
  };
  if (source === "url" && !url)
    problems.push("--health-gate url needs --health-url: the URL the sidecar probes");
  if (source === "pod" && !publishing.enabled) {
    problems.push(
      `--health-gate pod reads the pod's container statuses, but ${publishing.reason}; use --health-gate url with --health-url, or off`,
    );
  }
  if (source !== "off") {
    if (config.graceMs < timing.retryIntervalMs) {
      problems.push(
        `--health-grace (${config.graceMs} ms) is shorter than the retry interval (${timing.retryIntervalMs} ms): followers would not see the lease free before the leader gives it up again; raise it`,
      );
    }
    if (config.settleMs < config.graceMs) {
      problems.push(
        `--health-settle (${config.settleMs} ms) must be at least --health-grace (${config.graceMs} ms)`,
      );
    }
    if (source === "url" && config.intervalMs >= config.graceMs) {
      problems.push(
        `--health-interval (${config.intervalMs} ms) must be shorter than --health-grace (${config.graceMs} ms): the grace period needs several probes`,
      );
    }
  }
  return config;
}

function parseSource(text: string): Parsed<HealthConfig["source"]> {
  const t = text.trim();
  return t === "off" || t === "pod" || t === "url"
    ? { value: t }
    : { problem: `${JSON.stringify(text)} is not a health gate; use off, pod or url` };
}

function parseHealthUrl(text: string): Parsed<URL> {
  try {
    const url = new URL(text.trim());
    if (url.username || url.password) {
      return {
        problem:
          "carries a user name or password, which the probe cannot send; use a URL without them (a token in the query works)",
      };
    }
    if (url.protocol === "http:" || url.protocol === "https:") return { value: url };
  } catch {}
  return { problem: "is not an http:// or https:// URL, e.g. http://127.0.0.1:8080/healthz" };
}

function parseNames(text: string): Parsed<string[]> {
  const names = text.split(",").map((n) => n.trim());
  const bad = names.filter((n) => !/^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$/.test(n));
  return bad.length === 0
    ? { value: names }
    : {
        problem: `${bad.map((b) => JSON.stringify(b)).join(", ")} is not a container name (lower-case letters, digits, -)`,
      };
}
