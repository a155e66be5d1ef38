// The composition root's start-up and pool behaviour, through the public openLeases(), on a real
// PostgreSQL: the library gets what `pglease run` has (start-up retry, the synchronous_commit
// warning, polling when LISTEN is refused, pool settings, idle-connection errors reported).
import { randomBytes } from "node:crypto";
import { setTimeout as sleep } from "node:timers/promises";
import pg from "pg";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { type LeaseLogger, openLeases, StartAborted } from "../../src/index.ts";
import { MIGRATION_LOCK_ID } from "../../src/postgres/migrate.ts";
import { createTestDatabase, type TestDatabase } from "../support/postgres/database.ts";
import { type FaultProxy, startFaultProxy } from "../support/postgres/fault-proxy.ts";

let db: TestDatabase;
let admin: pg.Pool;
const cleanup: Array<() => Promise<unknown>> = [];

beforeAll(async () => {
  db = await createTestDatabase();
  admin = new pg.Pool({ connectionString: db.url, max: 2 });
});
afterEach(async () => {
  for (const fn of cleanup.splice(0).reverse()) await fn();
});
afterAll(async () => {
  await admin.end();
  await db.drop();
});

function recordingLogger(): LeaseLogger & { warnings: string[] } {
  const warnings: string[] = [];
  return { warnings, info: () => {}, warn: (message) => warnings.push(message) };
}

async function proxy(): Promise<FaultProxy> {
  const target = new URL(db.url);
  const p = await startFaultProxy({ host: target.hostname, port: Number(target.port) });
  cleanup.push(() => p.close());
  return p;
}

describe("a PostgreSQL too slow to answer at open", () => {
  it("is waited for like an unreachable one: a start-up statement cut by the server's timeouts is retried, not fatal", async () => {
    await openLeases({ connectionString: db.url, restartTakeover: false }).then((l) => l.close());
    // Another session holds the catalog the start-up check of the table reads: that statement
    // waits, and the lease connection's lock_timeout (the statement timeout) cuts it.
    const blocker = new pg.Client({ connectionString: db.url });
    await blocker.connect();
    cleanup.push(() => blocker.end());
    await blocker.query("BEGIN");
    await blocker.query("LOCK TABLE pg_catalog.pg_trigger IN ACCESS EXCLUSIVE MODE");
    const logger = recordingLogger();
    const opening = openLeases({
      connectionString: db.url,
      logger,
      migrate: false,
      statementTimeoutMs: 300,
      startTimeoutMs: 60_000,
      restartTakeover: false,
    });
    opening.catch(() => {});
    await expect.poll(() => logger.warnings.length, { timeout: 20_000 }).toBeGreaterThan(0);
    expect(logger.warnings[0]).toMatch(
      /^PostgreSQL did not answer in time yet \(canceling statement due to (statement|lock) timeout\); retrying in \d+ ms, for up to \d+ s more$/,
    );
    await blocker.query("ROLLBACK");
    const leases = await opening;
    cleanup.push(() => leases.close());
    expect(leases.notify).toBe(true);
  });
});

describe("an unreachable PostgreSQL at open", () => {
  it("is waited for, with a warning per attempt, and the leases open once it answers", async () => {
    const link = await proxy();
    link.cut();
    const logger = recordingLogger();
    const opening = openLeases({ connectionString: link.url(db.url), logger, startTimeoutMs: 30_000 });
    await expect.poll(() => logger.warnings.length, { timeout: 10_000 }).toBeGreaterThan(0);
    expect(logger.warnings[0]).toMatch(
      /^cannot reach PostgreSQL yet \(.+\); retrying in \d+ ms, for up to \d+ s more$/,
    );
    link.heal();
    const leases = await opening;
    cleanup.push(() => leases.close());
    const e = leases.campaign("after-outage");
    await expect.poll(() => e.isLeader()).toBe(true);
  });

  it("fails at once with startTimeoutMs 0, and an abort ends the wait with StartAborted", async () => {
    const link = await proxy();
    link.cut();
    await expect(openLeases({ connectionString: link.url(db.url), startTimeoutMs: 0 })).rejects.toThrow(
      /ECONNRESET|Connection terminated|ECONNREFUSED/,
    );
    const abort = new AbortController();
    const opening = openLeases({
      connectionString: link.url(db.url),
      logger: recordingLogger(),
      signal: abort.signal,
    });
    abort.abort();
    await expect(opening).rejects.toBeInstanceOf(StartAborted);
  });
});

describe("a PostgreSQL with no connection left for the role at open", () => {
  it("is waited for like an unreachable one: the pool's refused connection is retried until a slot frees", async () => {
    // A rollout's surge, or the sessions of a process that just stopped not yet ended on the
    // server (a backend exits after its client closed): the refusal lasts only until they end.
    const role = `pglease_full_${randomBytes(3).toString("hex")}`;
    await admin.query(`CREATE ROLE ${role} LOGIN PASSWORD 'full-role' CONNECTION LIMIT 1`);
    await admin.query(`GRANT ALL ON DATABASE ${db.name} TO ${role}; GRANT ALL ON SCHEMA public TO ${role}`);
    const url = new URL(db.url);
    url.username = role;
    url.password = "full-role";
    // The session that uses the role's one connection until the test ends it.
    const other = new pg.Client({ connectionString: url.toString() });
    await other.connect();
    let otherEnded = false;
    cleanup.push(async () => otherEnded || other.end());
    const logger = recordingLogger();
    const opening = openLeases({
      connectionString: url.toString(),
      poolSize: 1,
      // Its own table: this role creates it, as it could not claim in one another role owns.
      table: "full_role_leases",
      notify: false,
      logger,
      startTimeoutMs: 60_000,
      restartTakeover: false,
    });
    opening.catch(() => {});
    await expect.poll(() => logger.warnings.length, { timeout: 20_000 }).toBeGreaterThan(0);
    expect(logger.warnings[0]).toMatch(
      /^PostgreSQL has no connection left yet \(too many connections for role "pglease_full_[0-9a-f]+"\); retrying in \d+ ms, for up to \d+ s more$/,
    );
    expect(logger.warnings[0]).not.toContain("full-role");
    await other.end();
    otherEnded = true;
    const leases = await opening;
    cleanup.push(() => leases.close());
    const e = leases.campaign("after-slot-freed");
    await expect.poll(() => e.isLeader(), { timeout: 10_000 }).toBe(true);
  });
});

it("warns when lease writes would commit asynchronously", async () => {
  await admin.query(`ALTER DATABASE ${db.name} SET synchronous_commit = off`);
  try {
    const logger = recordingLogger();
    const leases = await openLeases({ connectionString: db.url, logger, notify: false });
    await leases.close();
    expect(logger.warnings.join("\n")).toMatch(/synchronous_commit is off .* set it to on/);
  } finally {
    await admin.query(`ALTER DATABASE ${db.name} RESET synchronous_commit`);
  }
});

it("polls instead of failing when the LISTEN connection is refused", async () => {
  // A role allowed one connection: the pool's. The LISTEN connection is refused (53300).
  const role = `pglease_one_${randomBytes(3).toString("hex")}`;
  await admin.query(`CREATE ROLE ${role} LOGIN PASSWORD 'one-connection' CONNECTION LIMIT 1`);
  await admin.query(`GRANT ALL ON DATABASE ${db.name} TO ${role}; GRANT ALL ON SCHEMA public TO ${role}`);
  const url = new URL(db.url);
  url.username = role;
  url.password = "one-connection";
  const logger = recordingLogger();
  const leases = await openLeases({
    connectionString: url.toString(),
    poolSize: 1,
    table: "one_connection_leases",
    logger,
  });
  cleanup.push(() => leases.close());
  expect(leases.notify).toBe(false);
  expect(logger.warnings.join("\n")).toMatch(/could not LISTEN for release notices .*polling instead/);
  const e = leases.campaign("polled");
  await expect.poll(() => e.isLeader()).toBe(true);
});

it("keeps to its pool size and reports an idle connection that dies instead of crashing", async () => {
  const applicationName = `pglease_pool_${randomBytes(3).toString("hex")}`;
  const logger = recordingLogger();
  const leases = await openLeases({
    connectionString: db.url,
    poolSize: 1,
    applicationName,
    logger,
    notify: false,
  });
  cleanup.push(() => leases.close());
  // Renewals 10 s apart, so that nothing is due on the one connection when the test ends it.
  const timing = { leaseDurationMs: 30_000, renewIntervalMs: 10_000 };
  const electors = ["a", "b", "c"].map((key) => leases.campaign(`sized-${key}`, timing));
  await expect.poll(() => electors.every((e) => e.isLeader())).toBe(true);
  const backends = async () =>
    (
      await admin.query<{ pid: number; state: string }>(
        "SELECT pid, state FROM pg_stat_activity WHERE application_name = $1",
        [applicationName],
      )
    ).rows;
  expect((await backends()).length).toBe(1);
  // The connection is idle only once the candidacy's first write (sent after the first ticks)
  // is done: at load 19 the test ended the connection under that write, which then reported it.
  const candidates = async () =>
    (await admin.query("SELECT 1 FROM pglease_leases_candidates WHERE key LIKE 'sized-%'")).rowCount;
  await expect.poll(candidates, { timeout: 10_000 }).toBe(3);
  const pool = leases.store.pool;
  await expect.poll(() => pool.idleCount === 1 && pool.waitingCount === 0).toBe(true);
  await admin.query("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = $1", [
    applicationName,
  ]);
  await expect.poll(() => logger.warnings.join("\n")).toMatch(/an idle database connection failed/);
  expect(logger.warnings.join("\n")).not.toMatch(/could not record this process as a candidate/);
  // The pool replaced it at the next renewals (10 s after the claims): the leases still renew.
  await expect.poll(async () => (await backends()).length, { timeout: 20_000 }).toBe(1);
  expect(electors.every((e) => e.isLeader())).toBe(true);
});

it("refuses a second campaign for a key it already campaigns for", async () => {
  const leases = await openLeases({
    connectionString: db.url,
    holder: "only-once",
    notify: false,
    restartTakeover: false,
  });
  cleanup.push(() => leases.close());
  const first = leases.campaign("job");
  expect(() => leases.campaign("job")).toThrow(
    /lease job is already campaigned for by this process \(holder only-once\): one campaign per key/,
  );
  await expect.poll(() => first.isLeader()).toBe(true);
});

it("gives lease connections the server-side timeouts: a claim stuck behind a row lock is cancelled by the server", async () => {
  const applicationName = `pglease_timeouts_${randomBytes(3).toString("hex")}`;
  const leases = await openLeases({
    connectionString: db.url,
    applicationName,
    statementTimeoutMs: 300,
    notify: false,
    logger: recordingLogger(),
  });
  cleanup.push(() => leases.close());
  const locker = await admin.connect();
  const waiting = async () =>
    (
      await admin.query<{ n: number }>(
        "SELECT count(*)::int AS n FROM pg_stat_activity WHERE application_name = $1 AND wait_event_type = 'Lock'",
        [applicationName],
      )
    ).rows[0]?.n;
  try {
    // An expired row, so the stuck claim would win if it ever ran to its commit.
    await admin.query(
      `INSERT INTO pglease_leases VALUES ('locked', 'someone', 1, clock_timestamp() - interval '2 minutes', clock_timestamp() - interval '1 minute')`,
    );
    await locker.query("BEGIN");
    await locker.query("SELECT * FROM pglease_leases WHERE key = 'locked' FOR UPDATE");
    // The client gives up at 300 ms; the server's lock_timeout cancels the statement itself.
    await expect(leases.store.claim("locked", "other", 60_000)).rejects.toThrow();
    await expect.poll(waiting, { timeout: 5_000 }).toBe(0);
  } finally {
    await locker.query("ROLLBACK");
    locker.release();
  }
  // Nothing committed later: the row is still the expired one.
  const row = await admin.query("SELECT holder FROM pglease_leases WHERE key = 'locked'");
  expect(row.rows).toEqual([{ holder: "someone" }]);
});

it("refuses a standby in recovery, naming the fix, without retrying", async () => {
  const { startReplicaPair } = await import("../support/postgres/replica-pair.ts");
  const pair = await startReplicaPair();
  cleanup.push(() => pair.stop());
  await expect(
    openLeases({ connectionString: pair.standbyUrl, migrate: false, startTimeoutMs: 60_000 }),
  ).rejects.toThrow(
    /the server is a standby in recovery: it cannot take a claim\. Point the connection at the primary/,
  );
});

it("waits for another replica's migration longer than its statement timeout (replicas start together)", async () => {
  const other = await admin.connect();
  try {
    await other.query("BEGIN");
    await other.query("SELECT pg_advisory_xact_lock($1)", [MIGRATION_LOCK_ID]);
    const opening = openLeases({
      connectionString: db.url,
      table: "migrating_together",
      statementTimeoutMs: 300,
      notify: false,
      logger: recordingLogger(),
    });
    await sleep(800);
    await other.query("COMMIT");
    const leases = await opening;
    cleanup.push(() => leases.close());
  } finally {
    other.release();
  }
});

describe("the first claim after start", () => {
  // The candidates' announcement went out beside the first claim and took the pool's one open
  // connection, so the claim waited for a new one (13.5 → 5.6 ms median to the first term here).
  it("goes out on the connection the start-up opened, the announcement after it", async () => {
    const pool = new pg.Pool({ connectionString: db.url, max: 4 });
    cleanup.push(() => pool.end());
    const leases = await openLeases({ pool, holder: "first-claim", logger: recordingLogger() });
    cleanup.push(() => leases.close());
    expect(pool.totalCount).toBe(1);
    const elector = leases.campaign("first-claim", {});
    await new Promise<void>((resolve) =>
      elector.on("tick", (tick) => {
        if (tick.outcome === "acquired") resolve();
      }),
    );
    expect(pool.totalCount).toBe(1);
    // The announcement followed: the process is listed as a candidate.
    await expect
      .poll(async () => (await admin.query("SELECT holder FROM pglease_leases_candidates")).rows)
      .toEqual([{ holder: leases.holder }]);
  });
});
