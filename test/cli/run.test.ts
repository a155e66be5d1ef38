import { describe, expect, it } from "vitest";
import { freePort } from "../support/postgres/embedded-postgres.ts";
import { startFaultProxy } from "../support/postgres/fault-proxy.ts";
import { fatalText, runPglease, startPglease, startShortLeaseRun } from "../support/processes/cli.ts";
import { cliSuite } from "../support/processes/cli-suite.ts";

const suite = cliSuite();

async function replica(lease: string, extra: string[] = []) {
  const { run: r, port } = await startShortLeaseRun(lease, { DATABASE_URL: suite.db.url }, extra);
  suite.track(r);
  const get = async (path: string, init?: RequestInit) => fetch(`http://127.0.0.1:${port}${path}`, init);
  return { r, port, get };
}

/** Far below the 20–30 s the follower would wait for the lease to run out or for its next look. */
const HANDOVER_BOUND_MS = 5_000;

async function longLeaseReplica(lease: string) {
  const port = await freePort();
  const r = startPglease(
    [
      "run",
      "--lease",
      lease,
      "--http-addr",
      `127.0.0.1:${port}`,
      "--duration",
      "30s",
      "--retry-interval",
      "60s",
    ],
    { DATABASE_URL: suite.db.url },
  );
  suite.track(r);
  return { r, get: (path: string) => fetch(`http://127.0.0.1:${port}${path}`) };
}

const logLines = (stdout: string): Array<Record<string, unknown>> =>
  stdout
    .split("\n")
    .filter((line) => line.startsWith("{"))
    .map((line) => JSON.parse(line) as Record<string, unknown>);

describe("configuration errors", () => {
  it("exit 2 and list every problem at once, each naming its flag or variable", async () => {
    const out = await runPglease(["run", "--duration", "fast", "--http-addr", "nowhere", "--bogus"], {
      PGLEASE_RETRY_INTERVAL: "-1s",
    });
    expect(out.code).toBe(2);
    expect(fatalText(out)).toContain("unknown flag --bogus");
    expect(fatalText(out)).toContain('--duration: "fast" is not a duration');
    expect(fatalText(out)).toContain('PGLEASE_RETRY_INTERVAL: "-1s" is not a duration');
    expect(fatalText(out)).toContain('--http-addr: "nowhere" is not an address');
    expect(fatalText(out)).toContain("--lease (PGLEASE_LEASE) is required");
    expect(fatalText(out)).toContain("no database given: set DATABASE_URL");
    expect(fatalText(out)).not.toMatch(/\n\s+at /);
  });

  it("report inconsistent timing with the flags the user wrote", async () => {
    const out = await runPglease(["run", "--lease", "x", "--duration", "3s", "--renew-interval", "3s"], {
      DATABASE_URL: suite.db.url,
    });
    expect(out.code).toBe(2);
    expect(fatalText(out)).toContain("--renew-interval (3000 ms) must be shorter than --duration (3000 ms)");
  });

  it("never echo a malformed DATABASE_URL, which may hold a password", async () => {
    const out = await runPglease(["run", "--lease", "x"], {
      DATABASE_URL: "mysql://root:hunter2-secret@db/x",
    });
    expect(out.code).toBe(2);
    expect(fatalText(out)).toContain("DATABASE_URL is not a postgres:// URL");
    expect(out.stdout + out.stderr).not.toContain("hunter2");
  });

  it("answer --help on every command with usage and examples", async () => {
    for (const command of ["run", "status", "history", "release", "migrate", "demo"]) {
      const out = await runPglease([command, "--help"]);
      expect(out.code).toBe(0);
      expect(out.stdout).toContain(`Usage: pglease ${command}`);
      expect(out.stdout).toMatch(/Examples?:/);
    }
    const top = await runPglease(["--help"]);
    expect(top.stdout).toContain("Commands:");
    expect((await runPglease(["frobnicate"])).code).toBe(2);
  });
});

describe("a running controller", () => {
  it("leads, answers every endpoint, and exposes the metrics by name", async () => {
    const a = await replica("endpoints");
    const acquired = await a.r.waitForLog(/^acquired lease endpoints with fence \d+$/);
    expect(acquired).toMatchObject({
      level: "info",
      lease: "endpoints",
      key: "endpoints",
      outcome: "acquired",
      // holder is this process on every line, transitions included; heldBy is who holds after it.
      heldBy: acquired.holder,
      previous_holder: null,
      reason: "claim",
    });
    expect(acquired.fence).toEqual(Number(String(acquired.msg).match(/fence (\d+)$/)?.[1]));

    expect((await a.get("/healthz")).status).toBe(200);
    await expect.poll(async () => (await a.get("/readyz")).status).toBe(200);
    const leader = await a.get("/leader");
    expect(leader.status).toBe(200);
    expect(await leader.json()).toMatchObject({ lease: "endpoints", role: "leader" });

    const status = (await (await a.get("/status")).json()) as {
      holder: string;
      leases: Array<Record<string, unknown>>;
    };
    // The pod name, a random suffix, and the restart proof (crash failover in restart time).
    expect(status.holder).toMatch(/-[0-9a-f]{8}#r:[0-9a-f]{32}\.[0-9]+$/);
    expect(acquired.holder).toBe(status.holder);
    expect(acquired).not.toHaveProperty("self");
    expect(status.leases).toEqual([
      expect.objectContaining({
        lease: "endpoints",
        role: "leader",
        leader: status.holder,
        // The first renew may already have run: renewals fall on a process-wide grid.
        lastOutcome: expect.stringMatching(/^(acquired|renewed)$/),
      }),
    ]);
    expect(typeof status.leases[0]?.fence).toBe("number");

    const metrics = await (await a.get("/metrics")).text();
    expect(metrics).toContain('leader_election_master_status{name="endpoints"} 1');
    expect(metrics).toContain('pglease_leader{lease="endpoints"} 1');
    expect(metrics).toContain(
      'pglease_transitions_total{lease="endpoints",direction="gained",reason="claim"} 1',
    );
    expect(metrics).toMatch(
      /^pglease_build_info\{version="\d+\.\d+\.\d+[^"]*",node_version="v\d+[^"]*"\} 1$/m,
    );
    expect(metrics).toMatch(
      /^pglease_statement_duration_seconds_count\{lease="endpoints",statement="claim",outcome="acquired"\} 1$/m,
    );
    // The test's database server runs on this machine: one clock, offset within the round trip.
    const offset = Number(metrics.match(/^pglease_db_clock_offset_seconds (\S+)$/m)?.[1]);
    expect(Math.abs(offset)).toBeLessThan(0.5);
    for (const name of [
      "pglease_fence",
      "pglease_transitions_total",
      "pglease_lease_remaining_seconds",
      "pglease_statement_duration_seconds",
      "pglease_renew_lateness_seconds",
      "pglease_deadline_margin_seconds",
      "pglease_release_notices_total",
      "pglease_db_clock_steps_total",
      "pglease_renew_failures_total",
      "pglease_pod_patch_duration_seconds",
      "pglease_pod_patch_errors_total",
      "pglease_publish_lag_seconds",
      "process_resident_memory_bytes",
    ]) {
      expect(metrics).toContain(`# TYPE ${name} `);
    }

    expect((await a.get("/leader?lease=nope")).status).toBe(400);
    const bad = await a.get("/status?verbose=1");
    expect(bad.status).toBe(400);
    expect(await bad.json()).toEqual({ error: 'unknown query parameter "verbose" for /status' });
    expect((await a.get("/status", { method: "POST" })).status).toBe(405);
    expect((await a.get("/nope")).status).toBe(404);
  });

  it("a second replica follows; a graceful stop releases, and the follower takes over on the notice", async () => {
    // A 30 s lease, and a follower that looks only every 60 s: within HANDOVER_BOUND_MS, only the
    // release ending the row in place and its NOTIFY reaching the follower can make it claim.
    const a = await longLeaseReplica("handover");
    await a.r.waitForLog(/^acquired lease handover/);
    const b = await longLeaseReplica("handover");
    const seen = await b.r.waitForLog(/^lease handover is held by /);
    expect((await b.get("/leader")).status).toBe(503);
    // b records its candidacy after its first look (the "held by" line), in a statement of its own:
    // a's graceful stop reserves for the live candidates it reads, so a stop before b's row is
    // committed releases to anyone, and b's claim on the notice is a plain claim, not a handover.
    await expect
      .poll(
        async () => {
          const { rows } = await suite.admin.query<{ holder: string }>(
            "SELECT holder FROM pglease_leases_candidates WHERE key = 'handover' AND seen_until > clock_timestamp()",
          );
          return rows.map((r) => r.holder).includes(String(seen.holder));
        },
        { timeout: 15_000 },
      )
      .toBe(true);

    const exit = await a.r.stop("SIGTERM");
    expect(exit.code).toBe(0);
    const released = logLines(exit.stdout).find((l) =>
      /^released lease handover \(fence \d+\)$/.test(String(l.msg)),
    );
    expect(released).toBeDefined();
    const releasedFence = Number(String(released?.msg).match(/fence (\d+)/)?.[1]);
    const taken = await b.r.waitForLog(/^acquired lease handover with fence \d+$/, 2 * HANDOVER_BOUND_MS);
    expect(Date.parse(String(taken.time)) - Date.parse(String(released?.time))).toBeLessThan(
      HANDOVER_BOUND_MS,
    );
    const takenFence = Number(String(taken.msg).match(/fence (\d+)$/)?.[1]);
    expect(takenFence).toBeGreaterThan(releasedFence);
    // The row the release ended is the one b took: same key, a higher fence, b's now.
    const { holder } = (await (await b.get("/status")).json()) as { holder: string };
    const row = await suite.admin.query(
      "SELECT holder, fence::int FROM pglease_leases WHERE key = 'handover'",
    );
    expect(row.rows).toEqual([{ holder, fence: takenFence }]);
    // b's line about a's term: holder is b (as on all its lines), heldBy is a.
    expect(seen).toMatchObject({ holder, heldBy: released?.holder, outcome: "held-by-other" });
    // The log lines and the history table tell the change of hands in the same words.
    const aHolder = released?.holder;
    expect(aHolder).toMatch(/-[0-9a-f]{8}#r:[0-9a-f]{32}\.[0-9]+$/);
    expect(released).toMatchObject({
      key: "handover",
      fence: releasedFence,
      heldBy: null,
      previous_holder: aHolder,
      reason: "release",
    });
    // The stopping leader reserved the lease for its only live candidate: b's claim is a handover.
    expect(taken).toMatchObject({
      key: "handover",
      fence: takenFence,
      holder,
      heldBy: holder,
      previous_holder: aHolder,
      reason: "handover",
    });
    const history = await suite.admin.query(
      "SELECT fence::int, holder, previous_holder, reason FROM pglease_leases_history WHERE key = 'handover' ORDER BY id",
    );
    expect(history.rows.slice(-2)).toEqual([
      { fence: releasedFence, holder: null, previous_holder: aHolder, reason: "release" },
      { fence: takenFence, holder, previous_holder: aHolder, reason: "handover" },
    ]);
  });

  it("several leases in one process, and /leader asks which", async () => {
    const a = await replica("multi-a", ["--lease", "multi-b"]);
    await a.r.waitForLog(/^acquired lease multi-a/);
    await a.r.waitForLog(/^acquired lease multi-b/);
    expect((await a.get("/leader")).status).toBe(400);
    expect((await a.get("/leader?lease=multi-b")).status).toBe(200);
  });
});

describe("start-up while PostgreSQL is unreachable", () => {
  it("waits for it (bounded by --start-timeout) and campaigns once it answers", async () => {
    const url = new URL(suite.db.url);
    const proxy = await startFaultProxy({ host: url.hostname, port: Number(url.port) });
    try {
      proxy.cut();
      const port = await freePort();
      const r = startPglease(["run", "--lease", "late-db", "--http-addr", `127.0.0.1:${port}`], {
        DATABASE_URL: proxy.url(suite.db.url),
      });
      suite.track(r);
      const warning = await r.waitForLog(/^cannot reach PostgreSQL yet \(.*\); retrying in \d+ ms/);
      expect(warning).toMatchObject({ level: "warn", attempt: 1 });
      proxy.heal();
      await r.waitForLog(/^acquired lease late-db with fence \d+$/);
    } finally {
      await proxy.close();
    }
  });

  it("a SIGTERM while waiting exits 0 at once", async () => {
    const port = await freePort();
    const r = startPglease(["run", "--lease", "never", "--http-addr", `127.0.0.1:${port}`], {
      DATABASE_URL: "postgres://nobody:pw@127.0.0.1:1/none",
    });
    suite.track(r);
    await r.waitForLog(/^cannot reach PostgreSQL yet/);
    const exit = await r.stop("SIGTERM");
    expect(exit.code).toBe(0);
    expect(exit.stdout).toContain("SIGTERM before start-up finished: stopping");
  });
});

describe("operator commands", () => {
  it("migrate, status (table and JSON) and a forced release that still bumps the fence", async () => {
    const env = { DATABASE_URL: suite.db.url };
    const migrated = await runPglease(["migrate", "--schema", "ops"], env);
    expect(migrated).toMatchObject({ code: 0 });
    expect(migrated.stdout).toBe("lease table ops.pglease_leases is ready\n");
    await suite.admin.query(
      "INSERT INTO ops.pglease_leases VALUES ('job', 'pod-1-abcd', 7, clock_timestamp(), clock_timestamp() + interval '1 minute')",
    );
    const table = await runPglease(["status", "--schema", "ops"], env);
    expect(table.stdout).toMatch(/^LEASE\s+HOLDER\s+FENCE\s+ACQUIRED\s+EXPIRES\s+REMAINING\s+STATE\n/);
    expect(table.stdout).toMatch(/job\s+pod-1-abcd\s+7\s+\S+\s+\S+\s+\d+\.\ds\s+held/);

    const json = JSON.parse((await runPglease(["status", "--schema", "ops", "--json"], env)).stdout);
    expect(json).toEqual({
      leases: [
        {
          key: "job",
          holder: "pod-1-abcd",
          cluster: null,
          fence: 7,
          acquiredAt: expect.any(String),
          expiresAt: expect.any(String),
          remainingMs: expect.any(Number),
          state: "held",
        },
      ],
    });

    const released = await runPglease(["release", "job", "--schema", "ops"], env);
    expect(released.stdout).toBe(
      "released lease job held by pod-1-abcd (fence 7); the next claim gets a higher fence\n",
    );
    expect((await runPglease(["release", "job", "--schema", "ops"], env)).stdout).toBe(
      "lease job was not held: nothing to release\n",
    );
    const after = JSON.parse((await runPglease(["status", "--schema", "ops", "--json"], env)).stdout);
    expect(after.leases[0]).toMatchObject({ fence: 7, state: "expired", remainingMs: 0 });
    expect((await runPglease(["release"], env)).code).toBe(2);
  });
});

describe("secrets", () => {
  it("the database password appears in no output, endpoint or error", async () => {
    const password = "s3cr3t-Pa55word";
    await suite.admin.query(
      `DO $$ BEGIN CREATE ROLE pglease_secret LOGIN PASSWORD '${password}'; EXCEPTION WHEN duplicate_object THEN NULL; END $$`,
    );
    await suite.admin.query(`GRANT ALL ON SCHEMA public TO pglease_secret`);
    await suite.admin.query(`GRANT ALL ON ALL TABLES IN SCHEMA public TO pglease_secret`);
    await suite.admin.query(`GRANT ALL ON ALL SEQUENCES IN SCHEMA public TO pglease_secret`);
    const url = new URL(suite.db.url);
    url.username = "pglease_secret";
    url.password = password;
    const port = await freePort();
    const r = startPglease(
      ["run", "--lease", "secret", "--http-addr", `127.0.0.1:${port}`, "--log-level", "debug"],
      {
        DATABASE_URL: url.toString(),
      },
    );
    suite.track(r);
    await r.waitForLog(/^acquired lease secret/);
    const bodies = await Promise.all(
      ["/status", "/metrics", "/readyz", "/healthz"].map(async (p) =>
        (await fetch(`http://127.0.0.1:${port}${p}`)).text(),
      ),
    );
    const stopped = await r.stop("SIGTERM");

    const wrong = new URL(url);
    wrong.password = `${password}-wrong`;
    const failed = await runPglease(["status"], { DATABASE_URL: wrong.toString() });
    expect(failed.code).toBe(1);
    const unreachable = await runPglease(["run", "--lease", "x", "--start-timeout", "1s"], {
      DATABASE_URL: `postgres://pglease_secret:${password}@127.0.0.1:1/none`,
    });
    expect(unreachable.code).toBe(1);
    expect(fatalText(unreachable)).toMatch(
      /^cannot reach PostgreSQL \(.*ECONNREFUSED.*\): check the host and port/,
    );
    expect(fatalText(unreachable)).not.toMatch(/\n\s+at /);
    expect(failed.stderr).toMatch(
      /^pglease status: PostgreSQL refused the login \(password authentication failed/,
    );

    for (const text of [
      stopped.stdout,
      stopped.stderr,
      failed.stdout,
      failed.stderr,
      unreachable.stdout,
      unreachable.stderr,
      ...bodies,
    ]) {
      expect(text).not.toContain(password);
    }
  });
});
