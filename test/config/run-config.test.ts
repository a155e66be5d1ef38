// `pglease run`'s configuration (src/config/run-config.ts): read once from flags and environment,
// validated once, every problem in one UsageError (the CLI prints them and exits 2, as
// test/cli/run.test.ts and cli-edges.test.ts check on the real process), nothing silently
// adjusted, and the database URL's password in no problem.
import { describe, expect, it } from "vitest";
import { UsageError } from "../../src/config/options.ts";
import { readRunConfig } from "../../src/config/run-config.ts";
import { NO_DIAL_DATABASE, runConfigProblems } from "../support/processes/run-config.ts";

const db = NO_DIAL_DATABASE;
const problemsOf = runConfigProblems;

describe("what it reads", () => {
  it("has the documented defaults", () => {
    const config = readRunConfig(["--lease", "orders"], db);
    expect(config).toMatchObject({
      leases: ["orders"],
      publishLease: "orders",
      http: { host: "::", port: 8484 },
      notify: true,
      migrate: true,
      restartTakeover: true,
      sessionTakeover: false,
      poolSize: 4,
      history: { maxAgeMs: 30 * 86_400_000, maxRowsPerKey: 1_000 },
      gracePeriodMs: 20_000,
      startTimeoutMs: 60_000,
      logLevel: "info",
      clusterName: null,
      candidacy: { priority: 0, preempt: false, noLead: false },
      database: { schema: "public", table: "pglease_leases", preparedStatements: true },
      publish: {
        roleLabel: "pglease.io/role",
        conditionType: "pglease.io/leader",
        fenceAnnotation: "pglease.io/fence",
        peerSelector: null,
        peerDemotion: true,
      },
      health: { source: "off" },
    });
    expect(config.timing).toMatchObject({
      leaseDurationMs: 15_000,
      renewIntervalMs: 5_000,
      retryIntervalMs: 2_000,
    });
  });

  it("takes flags over environment variables, repeatable leases, and --no- booleans", () => {
    const config = readRunConfig(["--lease", "a", "--lease=b", "--no-notify", "--duration", "30s"], {
      ...db,
      PGLEASE_LEASE: "ignored",
      PGLEASE_DURATION: "9s",
      PGLEASE_MIGRATE: "false",
    });
    expect(config.leases).toEqual(["a", "b"]);
    expect(config.notify).toBe(false);
    expect(config.migrate).toBe(false);
    expect(config.timing.leaseDurationMs).toBe(30_000);
  });

  it("a compound duration reaches the configuration, from a flag or its variable", () => {
    const config = readRunConfig(["--lease", "a", "--duration", "1m30s"], {
      ...db,
      PGLEASE_HISTORY_MAX_AGE: "1d12h",
    });
    expect(config.timing.leaseDurationMs).toBe(90_000);
    expect(config.history.maxAgeMs).toBe(36 * 3_600_000);
  });

  it("the candidacy's flags, and the takeover switches", () => {
    const env = { ...db, POD_UID: "3f1c", PGLEASE_RESTART_TAKEOVER: "false", PGLEASE_PRIORITY: "1000" };
    expect(readRunConfig(["--lease", "orders", "--session-takeover", "--preempt"], env)).toMatchObject({
      restartTakeover: false,
      sessionTakeover: true,
      candidacy: { priority: 1000, preempt: true, noLead: false },
      pod: { uid: "3f1c" },
    });
  });

  it("the pod's revision: POD_REVISION, else the pod-template-hash, else the controller-revision-hash", () => {
    const revision = (env: NodeJS.ProcessEnv) =>
      readRunConfig(["--lease", "a"], { ...db, ...env }).pod.revision;
    expect(revision({})).toBeUndefined();
    expect(revision({ CONTROLLER_REVISION_HASH: "sts-1" })).toBe("sts-1");
    expect(revision({ CONTROLLER_REVISION_HASH: "sts-1", POD_TEMPLATE_HASH: "7d9f" })).toBe("7d9f");
    expect(revision({ POD_TEMPLATE_HASH: "7d9f", POD_REVISION: " v2 " })).toBe("v2");
    expect(revision({ POD_REVISION: " ", POD_TEMPLATE_HASH: "7d9f" })).toBe("7d9f");
  });
});

describe("problems: every one at once, each naming its flag or variable and the fix", () => {
  it("lists every problem, naming where each value came from", () => {
    const many = problemsOf(
      ["--lease", "x", "--pool-size", "0", "--log-level", "loud", "--schema", "bad-name", "stray"],
      db,
    );
    expect(many).toEqual([
      'pglease run takes no arguments, got "stray"',
      expect.stringMatching(/^--schema must be a plain PostgreSQL identifier/),
      '--pool-size: "0" must be a whole number from 1 to 100',
      expect.stringMatching(/^--log-level: "loud" is not a log level/),
    ]);
  });

  it("the lease is required, named by flag and variable with an example; a misspelt --lease is not also missing", () => {
    expect(problemsOf([], db)).toEqual([
      "--lease (PGLEASE_LEASE) is required: name the lease(s), e.g. --lease orders-sync",
    ]);
    expect(problemsOf(["--leese", "orders"], db)).toEqual(["unknown flag --leese (did you mean --lease?)"]);
    expect(problemsOf(["--lease", "a", "--publish-lease", "b"], db)).toEqual([
      '--publish-lease "b" is not one of the leases given with --lease',
    ]);
  });

  it("timing: inconsistencies named by the flags (and variables) the user wrote", () => {
    expect(
      problemsOf(["--lease", "x", "--renew-interval", "20s"], { ...db, PGLEASE_DURATION: "10s" }),
    ).toEqual([
      "--renew-interval (20000 ms) must be shorter than --duration (PGLEASE_DURATION) (10000 ms); a third of it is usual",
      "--renew-interval + --safety-margin (20000 + 20000 ms) must be shorter than --duration (PGLEASE_DURATION) (10000 ms), or the leader would step down before its next renew",
    ]);
    expect(
      problemsOf(["--lease", "x", "--renew-interval", "2s", "--statement-timeout", "1500ms"], db),
    ).toEqual([
      "--statement-timeout (1500 ms) must be at most half of --renew-interval (2000 ms), so a hung call costs one tick",
    ]);
  });

  it("timing: consistency is not judged on a value that did not parse (one mistake, one problem)", () => {
    expect(problemsOf(["--lease", "a", "--duration", "soon", "--renew-interval", "20s"], db)).toEqual([
      '--duration: "soon" is not a duration; write a number and a unit, or several as Go does: 500ms, 15s, 1m30s, 1.5h, 30d',
    ]);
  });

  it("history retention, each bad value named by its flag", () => {
    expect(
      problemsOf(["--lease", "a", "--history-max-age", "forever", "--history-max-rows", "0"], db),
    ).toEqual([
      expect.stringMatching(/^--history-max-age: "forever" is not a duration/),
      '--history-max-rows: "0" must be a whole number from 1 to 10000000',
    ]);
  });

  it("what is published to the pod, by flag, and by variable where it came from one", () => {
    expect(problemsOf(["--lease", "a", "--role-label", "Bad Label!", "--cluster-name", "-x"], db)).toEqual([
      "--role-label \"Bad Label!\" must have a name part of letters, digits, '-', '_' and '.', starting and ending with a letter or digit (a label key)",
      "--cluster-name \"-x\" must be empty or letters, digits, '-', '_' and '.', starting and ending with a letter or digit (a name for this cluster, a label value)",
    ]);
    expect(problemsOf(["--lease", "a"], { ...db, PGLEASE_CONDITION_TYPE: "no/slash/twice" })).toEqual([
      "--condition-type (PGLEASE_CONDITION_TYPE) \"no/slash/twice\" must be a name with at most one '/' (an optional DNS-subdomain prefix) (a pod condition type)",
    ]);
  });

  it("switches that contradict each other say which to drop", () => {
    expect(problemsOf(["--lease", "a", "--session-takeover", "--no-notify"], db)).toEqual([
      "--session-takeover needs --notify: the notice session is what a holder records; drop --no-notify or --session-takeover",
    ]);
    expect(problemsOf(["--lease", "a", "--priority", "1001", "--preempt", "--no-lead"], db)).toEqual([
      '--priority: "1001" must be a whole number from 0 to 1000',
      "--preempt and --no-lead contradict each other: a process that never leads cannot preempt; give one of them",
    ]);
    expect(problemsOf(["--lease", "a", "--peer-selector", "app=x", "--no-peer-demotion"], db)).toEqual([
      "--peer-selector and --no-peer-demotion contradict each other: give one of them",
    ]);
  });

  it("the health gate's problems join the run's list", () => {
    expect(problemsOf(["--lease", "a", "--health-gate", "url", "--pool-size", "x"], db)).toEqual([
      '--pool-size: "x" must be a whole number from 1 to 100',
      "--health-gate url needs --health-url: the URL the sidecar probes",
    ]);
  });

  it("one UsageError carries them all, one a line; the database URL's password is in none", () => {
    const secret = "hunter2-secret";
    let caught: unknown;
    try {
      readRunConfig(["--duration", "soon", "--schema", "1x", "--health-url", `http://u:${secret}@h/`], {
        DATABASE_URL: `postgres://app:${secret}@db:5432/app?sslmode=prefer&sslrootcert=/nonexistent/ca.crt`,
        PGLEASE_POOL_SIZE: "many",
      });
    } catch (error) {
      caught = error;
    }
    expect(caught).toBeInstanceOf(UsageError);
    const error = caught as UsageError;
    expect(error.problems).toHaveLength(6);
    expect(error.message).toBe(error.problems.join("\n"));
    expect(error.message).not.toContain(secret);
  });
});
