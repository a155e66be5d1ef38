// The health gate's flags (src/config/health-config.ts): read with the rest of `pglease run` and
// checked against its lease timing and whether it publishes to a pod, every problem at once.
import { describe, expect, it } from "vitest";
import { HEALTH_OPTIONS, type HealthConfig, readHealthConfig } from "../../src/config/health-config.ts";
import { optionReader, readOptions } from "../../src/config/options.ts";
import { resolveTiming } from "../../src/election/timing.ts";
import type { PublishingDecision } from "../../src/kube/environment.ts";

const TIMING = resolveTiming({ leaseDurationMs: 15_000, retryIntervalMs: 2_000 }).timing;
const IN_POD: PublishingDecision = {
  enabled: true,
  namespace: "shop",
  podName: "orders-0",
  source: "in-cluster",
};
const NO_POD: PublishingDecision = {
  enabled: false,
  reason: "pod publishing is off: POD_NAME and POD_NAMESPACE not set",
};

function read(argv: string[], env: NodeJS.ProcessEnv = {}, publishing = IN_POD) {
  const raw = readOptions(HEALTH_OPTIONS, argv, env);
  const problems = [...raw.problems];
  const config = readHealthConfig(raw, optionReader(raw, problems), problems, TIMING, publishing);
  return { config, problems };
}

describe("what it reads", () => {
  it("off by default, with the documented defaults", () => {
    expect(read([])).toEqual({
      problems: [],
      config: {
        source: "off",
        url: null,
        intervalMs: 1_000,
        appContainers: null,
        sidecarContainer: "pglease",
        graceMs: 5_000,
        settleMs: 30_000,
        strict: false,
        waitAtStart: true,
      } satisfies HealthConfig,
    });
  });

  it("url once --health-url is given; pod from the pod's statuses, its containers named", () => {
    const url = read(["--health-url", "http://127.0.0.1:8080/healthz"]);
    expect(url.problems).toEqual([]);
    expect(url.config.source).toBe("url");
    expect(url.config.url?.href).toBe("http://127.0.0.1:8080/healthz");
    const pod = read(["--health-gate", "pod", "--app-containers", "web", "--app-containers", "worker"], {
      PGLEASE_SIDECAR_CONTAINER: "leader",
      PGLEASE_HEALTH_STRICT: "true",
      PGLEASE_HEALTH_WAIT: "false",
    });
    expect(pod.problems).toEqual([]);
    expect(pod.config).toMatchObject({
      source: "pod",
      appContainers: ["web", "worker"],
      sidecarContainer: "leader",
      strict: true,
      waitAtStart: false,
    });
  });
});

describe("problems, each naming its flag and the fix", () => {
  it("a gate that is none of off, pod, url; a URL that is not http(s)", () => {
    expect(read(["--health-url", "ftp://x", "--health-gate", "maybe"]).problems).toEqual([
      "--health-url: is not an http:// or https:// URL, e.g. http://127.0.0.1:8080/healthz",
      '--health-gate: "maybe" is not a health gate; use off, pod or url',
    ]);
    expect(read([], { PGLEASE_HEALTH_URL: "not a url" }).problems).toEqual([
      "PGLEASE_HEALTH_URL: is not an http:// or https:// URL, e.g. http://127.0.0.1:8080/healthz",
    ]);
  });

  it("a URL with credentials, which the probe cannot send, is refused without repeating them", () => {
    const { problems } = read(["--health-url", "http://u:hunter2-secret@127.0.0.1:8080/h"]);
    expect(problems).toEqual([
      "--health-url: carries a user name or password, which the probe cannot send; use a URL without them (a token in the query works)",
    ]);
  });

  it("url without --health-url; bad container names", () => {
    expect(read(["--health-gate", "url", "--app-containers", "Web_1,ok,-x"]).problems).toEqual([
      '--app-containers: "Web_1", "-x" is not a container name (lower-case letters, digits, -)',
      "--health-gate url needs --health-url: the URL the sidecar probes",
    ]);
  });

  it("pod where this process does not publish to a pod says why, and the alternatives", () => {
    expect(read(["--health-gate", "pod"], {}, NO_POD).problems).toEqual([
      "--health-gate pod reads the pod's container statuses, but pod publishing is off: POD_NAME and POD_NAMESPACE not set; use --health-gate url with --health-url, or off",
    ]);
  });

  it("timing against the lease's: grace at least the retry interval, settle at least the grace, several probes per grace", () => {
    expect(
      read([
        "--health-url",
        "http://h/",
        "--health-grace",
        "1s",
        "--health-settle",
        "500ms",
        "--health-interval",
        "1s",
      ]).problems,
    ).toEqual([
      "--health-grace (1000 ms) is shorter than the retry interval (2000 ms): followers would not see the lease free before the leader gives it up again; raise it",
      "--health-settle (500 ms) must be at least --health-grace (1000 ms)",
      "--health-interval (1000 ms) must be shorter than --health-grace (1000 ms): the grace period needs several probes",
    ]);
    // The bounds themselves are allowed.
    expect(
      read([
        "--health-url",
        "http://h/",
        "--health-grace",
        "2s",
        "--health-settle",
        "2s",
        "--health-interval",
        "1999ms",
      ]).problems,
    ).toEqual([]);
    // The probe interval matters only to the url gate.
    expect(read(["--health-gate", "pod", "--health-interval", "10s"]).problems).toEqual([]);
  });

  it("with the gate off, its timing is not checked", () => {
    expect(read(["--health-grace", "1s", "--health-settle", "500ms"]).problems).toEqual([]);
  });
});
