import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { readDatabaseConfig, redactUrl } from "../../src/config/database.ts";
import { optionHelp, readOptions } from "../../src/config/options.ts";
import { readRunConfig } from "../../src/config/run-config.ts";
import { RUN_OPTIONS } from "../../src/config/run-options.ts";
import { parseAddress, parseDuration, parseLeaseNames } from "../../src/config/values.ts";
import { NO_DIAL_DATABASE, runConfigProblems } from "../support/processes/run-config.ts";

const db = NO_DIAL_DATABASE;
const problemsOf = runConfigProblems;

describe("values", () => {
  it("durations need a unit and are whole milliseconds", () => {
    expect(parseDuration("15s")).toEqual({ value: 15_000 });
    expect(parseDuration("500ms")).toEqual({ value: 500 });
    expect(parseDuration("1.5s")).toEqual({ value: 1_500 });
    expect(parseDuration("2m")).toEqual({ value: 120_000 });
    expect(parseDuration("15")).toHaveProperty("problem");
    expect(parseDuration("0s")).toHaveProperty("problem");
    expect(parseDuration("0.1ms")).toHaveProperty("problem");
    expect(parseDuration("30d")).toEqual({ value: 30 * 86_400_000 });
  });

  it("durations take Go's syntax, compound and decimal, in whole milliseconds", () => {
    expect(parseDuration("1h")).toEqual({ value: 3_600_000 });
    expect(parseDuration("1m30s")).toEqual({ value: 90_000 });
    expect(parseDuration("2h45m")).toEqual({ value: 9_900_000 });
    expect(parseDuration("300ms")).toEqual({ value: 300 });
    expect(parseDuration("1.1s")).toEqual({ value: 1_100 });
    expect(parseDuration("0.29s")).toEqual({ value: 290 });
    expect(parseDuration("1.5h")).toEqual({ value: 5_400_000 });
    expect(parseDuration(".5s")).toEqual({ value: 500 });
    expect(parseDuration("1h0m0.001s")).toEqual({ value: 3_600_001 });
    for (const nonsense of ["", "s", "1", "1x", "1s2", "1m 30s", "-1s", "1..5s", "1hh", "1.s.5"]) {
      expect(parseDuration(nonsense)).toEqual({
        problem: `${JSON.stringify(nonsense)} is not a duration; write a number and a unit, or several as Go does: 500ms, 15s, 1m30s, 1.5h, 30d`,
      });
    }
    expect(parseDuration("1.5ms")).toEqual({
      problem: '"1.5ms" is not a whole number of milliseconds; pglease counts time in milliseconds',
    });
    expect(parseDuration("0m0s")).toEqual({ problem: '"0m0s" must be longer than zero' });
  });

  it("a compound duration reaches the run configuration, from a flag or its variable", () => {
    const config = readRunConfig(["--lease", "a", "--duration", "1m30s"], {
      ...db,
      PGLEASE_HISTORY_MAX_AGE: "1d12h",
    });
    expect(config.timing.leaseDurationMs).toBe(90_000);
    expect(config.history.maxAgeMs).toBe(36 * 3_600_000);
    expect(problemsOf(["--lease", "a", "--grace-period", "20"], db)).toEqual([
      '--grace-period: "20" is not a duration; write a number and a unit, or several as Go does: 500ms, 15s, 1m30s, 1.5h, 30d',
    ]);
  });

  it("history retention, each bad value named by its flag", () => {
    expect(
      readRunConfig(["--lease", "a", "--history-max-age", "2h", "--history-max-rows", "50"], db).history,
    ).toEqual({
      maxAgeMs: 7_200_000,
      maxRowsPerKey: 50,
    });
    expect(() =>
      readRunConfig(["--lease", "a", "--history-max-age", "forever", "--history-max-rows", "0"], db),
    ).toThrow(
      /--history-max-age: "forever" is not a duration[\s\S]*--history-max-rows: "0" must be a whole number from 1/,
    );
  });

  it("addresses and lease lists", () => {
    expect(parseAddress(":8484")).toEqual({ value: { host: "::", port: 8484 } });
    expect(parseAddress("[::1]:9")).toEqual({ value: { host: "::1", port: 9 } });
    expect(parseAddress("host:99999")).toHaveProperty("problem");
    expect(parseLeaseNames("a, b,c")).toEqual({ value: ["a", "b", "c"] });
    expect(parseLeaseNames("a,a")).toEqual({ problem: 'names lease "a" twice' });
  });
});

describe("pglease run configuration", () => {
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
      logLevel: "info",
      database: { schema: "public", table: "pglease_leases", preparedStatements: true },
      publish: {
        roleLabel: "pglease.io/role",
        conditionType: "pglease.io/leader",
        fenceAnnotation: "pglease.io/fence",
      },
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

  it("lists every problem, naming where each value came from", () => {
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

  it("takes the takeover switches from flags and environment, and refuses session takeover without notices", () => {
    const env = { ...db, POD_UID: "3f1c", PGLEASE_RESTART_TAKEOVER: "false" };
    expect(readRunConfig(["--lease", "orders", "--session-takeover"], env)).toMatchObject({
      restartTakeover: false,
      sessionTakeover: true,
      pod: { uid: "3f1c" },
    });
    expect(problemsOf(["--lease", "orders", "--session-takeover", "--no-notify"], db)).toEqual([
      "--session-takeover needs --notify: the notice session is what a holder records; drop --no-notify or --session-takeover",
    ]);
  });

  it("reads the health gate: off by default, url with --health-url, every inconsistency at once", () => {
    expect(readRunConfig(["--lease", "orders"], db).health).toMatchObject({ source: "off", graceMs: 5_000 });
    expect(
      readRunConfig(["--lease", "orders", "--health-url", "http://127.0.0.1:8080/healthz"], db).health,
    ).toMatchObject({
      source: "url",
      intervalMs: 1_000,
      settleMs: 30_000,
      strict: false,
      waitAtStart: true,
    });
    const inPod = { ...db, POD_NAME: "orders-0", POD_NAMESPACE: "shop", KUBECONFIG: "/k" };
    expect(
      readRunConfig(["--lease", "orders", "--health-gate", "pod", "--app-containers", "web,worker"], inPod)
        .health,
    ).toMatchObject({ source: "pod", appContainers: ["web", "worker"], sidecarContainer: "pglease" });
    expect(
      problemsOf(
        ["--lease", "orders", "--health-gate", "pod", "--health-grace", "1s", "--health-settle", "500ms"],
        db,
      ),
    ).toEqual([
      "--health-gate pod reads the pod's container statuses, but pod publishing is off: POD_NAME and POD_NAMESPACE not set (set them from the downward API: fieldRef metadata.name / metadata.namespace); use --health-gate url with --health-url, or off",
      "--health-grace (1000 ms) is shorter than the retry interval (2000 ms): followers would not see the lease free before the leader gives it up again; raise it",
      "--health-settle (500 ms) must be at least --health-grace (1000 ms)",
    ]);
    expect(
      problemsOf(["--lease", "orders", "--health-gate", "url", "--app-containers", "Web_1"], db),
    ).toEqual([
      '--app-containers: "Web_1" is not a container name (lower-case letters, digits, -)',
      "--health-gate url needs --health-url: the URL the sidecar probes",
    ]);
    // fetch refuses every request to a URL with credentials: the gate would never open.
    expect(problemsOf(["--lease", "orders", "--health-url", "http://u:secret@127.0.0.1:8080/h"], db)).toEqual(
      [
        "--health-url: carries a user name or password, which the probe cannot send; use a URL without them (a token in the query works)",
      ],
    );
    expect(
      problemsOf(["--lease", "orders", "--health-url", "ftp://x", "--health-gate", "maybe"], db),
    ).toEqual([
      "--health-url: is not an http:// or https:// URL, e.g. http://127.0.0.1:8080/healthz",
      '--health-gate: "maybe" is not a health gate; use off, pod or url',
    ]);
  });

  it("rejects a publish lease it does not campaign for", () => {
    expect(problemsOf(["--lease", "a", "--publish-lease", "b"], db)).toEqual([
      '--publish-lease "b" is not one of the leases given with --lease',
    ]);
  });

  it("flags needing a value and unknown flags are reported, not guessed", () => {
    const raw = readOptions([{ flag: "x", help: "" }], ["--x", "--y"], {});
    expect(raw.problems).toEqual([
      "--x needs a value",
      "unknown flag --y; see --help for the flags this command takes",
    ]);
  });

  it("a misspelt flag gets the flag meant, takes that flag's value along, and nothing cascades", () => {
    const specs = [
      { flag: "lease", value: "NAME", help: "" },
      { flag: "json", boolean: true, help: "" },
    ];
    const valued = readOptions(specs, ["--leese", "orders", "keep"], {});
    expect(valued.problems).toEqual(["unknown flag --leese (did you mean --lease?)"]);
    expect(valued.positionals).toEqual(["keep"]);
    expect(valued.misspelt).toEqual(new Set(["lease"]));
    // A boolean's misspelling takes no value: the next word stays a positional.
    const flag = readOptions(specs, ["--jsno", "orders"], {});
    expect(flag.problems).toEqual(["unknown flag --jsno (did you mean --json?)"]);
    expect(flag.positionals).toEqual(["orders"]);
    expect(readOptions(specs, ["--no-jsn"], {}).problems).toEqual([
      "unknown flag --no-jsn (did you mean --no-json?)",
    ]);
    expect(readOptions(specs, ["--lease=a", "--lese=b"], {}).problems).toEqual([
      "unknown flag --lese (did you mean --lease?)",
    ]);
    // Nothing close: no guess, and the word after it is not swallowed.
    const far = readOptions(specs, ["--frobnicate", "orders"], {});
    expect(far.problems).toEqual(["unknown flag --frobnicate; see --help for the flags this command takes"]);
    expect(far.positionals).toEqual(["orders"]);
    // The required flag it stood for is not reported missing as well.
    expect(problemsOf(["--leese", "orders"], db)).toEqual(["unknown flag --leese (did you mean --lease?)"]);
  });

  it("help states each default once, and a boolean's --no- form only in its left column", () => {
    for (const line of optionHelp(RUN_OPTIONS).split("\n")) {
      expect(line.match(/\bdefault\b/g)?.length ?? 0, line).toBeLessThanOrEqual(1);
      expect(line.match(/--no-[a-z-]+/g)?.length ?? 0, line).toBeLessThanOrEqual(1);
      expect(line, line).not.toMatch(/\(default [^)]*\(/);
    }
  });
});

describe("database settings", () => {
  it("builds TLS from PGSSLMODE and PGSSLROOTCERT, and reports what is wrong", async () => {
    const dir = await mkdtemp(join(tmpdir(), "pglease-ca-"));
    try {
      const ca = join(dir, "ca.crt");
      await writeFile(ca, "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n");
      const raw = readOptions([], [], {});
      const problems: string[] = [];
      const full = readDatabaseConfig(raw, { ...db, PGSSLMODE: "verify-full", PGSSLROOTCERT: ca }, problems);
      expect(full.ssl).toEqual({
        ca: expect.stringContaining("BEGIN CERTIFICATE"),
        rejectUnauthorized: true,
      });
      const verifyCa = readDatabaseConfig(
        raw,
        { ...db, PGSSLMODE: "verify-ca", PGSSLROOTCERT: ca },
        problems,
      );
      expect(verifyCa.ssl).toMatchObject({
        rejectUnauthorized: true,
        checkServerIdentity: expect.any(Function),
      });
      expect(readDatabaseConfig(raw, { ...db, PGSSLMODE: "disable" }, problems).ssl).toBe(false);
      expect(problems).toEqual([]);
      readDatabaseConfig(
        raw,
        { ...db, PGSSLMODE: "sometimes", PGSSLROOTCERT: join(dir, "missing.crt") },
        problems,
      );
      readDatabaseConfig(raw, { ...db, PGSSLROOTCERT: join(dir, "missing.crt") }, problems);
      expect(problems).toEqual([
        expect.stringMatching(/^PGSSLMODE: "sometimes" is not an SSL mode/),
        expect.stringMatching(/^PGSSLROOTCERT: cannot read .*missing\.crt \(ENOENT\)/),
      ]);
    } finally {
      await rm(dir, { recursive: true });
    }
  });

  it("redacts passwords when a URL must be shown", () => {
    expect(redactUrl("postgres://app:hunter2@db:5432/app?sslpassword=x")).toBe(
      "postgres://app:***@db:5432/app?sslpassword=***",
    );
  });
});
