// Each database fault of the chaos run does what it says on a real PostgreSQL (the chaos run's
// own server, under libfaketime when installed), and its heal undoes it.
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { leaseTable, migrate, PgLeaseStore } from "../../src/postgres/index.ts";
import type { ChaosCluster } from "./cluster.ts";
import { CREATE_LEASE_LOG } from "./cluster.ts";
import { type Active, injectDatabaseFault } from "./db-faults.ts";
import { type ChaosPostgres, startChaosPostgres } from "./faketime-postgres.ts";
import type { PlannedFault, SingleFaultKind } from "./schedule.ts";

const KEY = "chaos";
let db: ChaosPostgres;
let admin: pg.Pool;
let store: PgLeaseStore;
let cluster: ChaosCluster;

beforeAll(async () => {
  db = await startChaosPostgres();
  admin = new pg.Pool({ connectionString: db.server.url, max: 3 });
  admin.on("error", () => {});
  await migrate(admin, leaseTable());
  await admin.query(CREATE_LEASE_LOG);
  await admin.query("CREATE TABLE chaos_writes_probe (n int)");
  store = new PgLeaseStore({ pool: admin, statementTimeoutMs: 5_000 });
  // Only what the database faults read of the cluster.
  cluster = {
    admin,
    postgres: db.server,
    clock: db.clock,
    clockMissing: db.clockMissing,
    settings: { lease: KEY, leaseMs: 2_000 },
  } as unknown as ChaosCluster;
}, 120_000);

afterAll(async () => {
  await admin?.end();
  await db?.server.stop();
});

const fault = (kind: SingleFaultKind, extra: Partial<PlannedFault> = {}): PlannedFault => ({
  kind,
  target: "replica",
  fallback: 0,
  delayMs: 0,
  durationMs: 0,
  scope: "pod",
  latencyMs: 0,
  restartMode: "fast",
  stepMs: 0,
  sessionKill: "plain",
  ...extra,
});

const inject = (planned: PlannedFault): Promise<Active> => {
  const started = injectDatabaseFault(cluster, planned, {
    kind: planned.kind,
    target: null,
    startedAt: Date.now(),
  });
  if (!started) throw new Error(`no database fault ${planned.kind}`);
  return started;
};

async function session(options: string): Promise<pg.Client> {
  const client = new pg.Client({ connectionString: db.server.url, options });
  client.on("error", () => {});
  await client.connect();
  return client;
}

describe("chaos database faults on a real PostgreSQL", () => {
  it("commit-stall: a commit waits past statement_timeout until the heal, then commits", async () => {
    const client = await session("-c statement_timeout=300");
    const active = await inject(fault("commit-stall"));
    // pg_reload_conf() only signals: each backend takes the new settings at its next command.
    await vi.waitFor(async () =>
      expect((await client.query("SHOW synchronous_standby_names")).rows[0].synchronous_standby_names).toBe(
        "chaos_missing_standby",
      ),
    );
    try {
      const insert = client.query("INSERT INTO chaos_writes_probe VALUES (1)").then(
        () => "committed",
        (e: Error) => e.message,
      );
      expect((await admin.query("SELECT 1 AS one")).rows[0].one).toBe(1); // reads still run
      expect(
        await Promise.race([insert, new Promise((resolve) => setTimeout(resolve, 1_500, "waiting"))]),
      ).toBe("waiting");
      await active.heal();
      expect(await insert).toBe("committed");
    } finally {
      await active.heal();
    }
    expect(active.detail).toMatch(/\(1 commits waiting at the heal\)/);
    expect((await admin.query("SELECT count(*)::int AS n FROM chaos_writes_probe")).rows[0].n).toBe(1);
    await client.end();
  });

  it("row-lock: a renew queues behind the lock until its lock_timeout cancels it", async () => {
    const won = await store.claim(KEY, "holder-a", 60_000);
    if (!won.won) throw new Error("claim lost");
    const active = await inject(fault("row-lock"));
    const client = await session("-c lock_timeout=300");
    const renew = await client
      .query("UPDATE pglease_leases SET holder = holder WHERE key = $1", [KEY])
      .catch((e: { code?: string }) => e.code);
    expect(renew).toBe("55P03");
    await active.heal();
    expect(active.detail).toMatch(/held 0 ms/);
    await client.end();
  });

  it("row-delete and table-drop: the removed term is logged as ended, and fences go on rising", async () => {
    // holder-a, from the test before, takes its own live row back: a new term, a higher fence.
    const before = await store.claim(KEY, "holder-a", 60_000);
    const deleted = await inject(fault("row-delete"));
    expect(deleted.detail).toMatch(/DELETE of the lease row/);
    expect(deleted.serverEnded).toHaveLength(1);
    const again = await store.claim(KEY, "holder-c", 60_000);
    const dropped = await inject(fault("table-drop"));
    await dropped.heal();
    const after = await store.claim(KEY, "holder-d", 60_000);
    expect([before.won, again.won, after.won]).toEqual([true, true, true]);
    expect(Number(again.fence)).toBeGreaterThan(Number(before.fence));
    expect(Number(after.fence)).toBeGreaterThan(Number(again.fence));
    const log = await admin.query(
      "SELECT holder, fence::int, acquired_at = expires_at AS ended FROM chaos_lease_log ORDER BY seq",
    );
    // The claim after the migration is logged: the event trigger put the log on the new table.
    expect(log.rows.map((r) => [r.holder, r.ended])).toEqual(
      expect.arrayContaining([
        ["holder-a", true],
        ["holder-c", true],
        ["holder-d", false],
      ]),
    );
  });

  it("table-drop: a renew that commits while the drop waits for its lock is logged before the removal", async () => {
    // The renew's transaction holds the table (as a renew's does from its first statement on) and
    // updates the row only once the fault is under way; it commits before the DROP can take the
    // table. The removal must still be the term's last entry in the log, or the checker sees the
    // term renewed past the drop and a claim in the new table as an overlap.
    // holder-d, from the test before, takes its own live row back: a new term.
    const held = await store.claim(KEY, "holder-d", 60_000);
    expect(held.won).toBe(true);
    const renew = await session("");
    await renew.query("BEGIN");
    await renew.query(`SELECT 1 FROM ${leaseTable().qualified} WHERE key = 'none' FOR UPDATE`);
    const dropping = inject(fault("table-drop"));
    await vi.waitFor(
      async () => {
        const { rows } = await admin.query(
          "SELECT count(*)::int AS n FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND (query LIKE 'DROP TABLE%' OR query LIKE 'LOCK TABLE%')",
        );
        expect(rows[0].n).toBe(1);
      },
      { timeout: 10_000, interval: 20 },
    );
    await renew.query(
      `UPDATE ${leaseTable().qualified} SET expires_at = expires_at + interval '1 second' WHERE key = $1`,
      [KEY],
    );
    await renew.query("COMMIT");
    await renew.end();
    await (await dropping).heal();
    const log = await admin.query(
      "SELECT acquired_at = expires_at AS ended FROM chaos_lease_log WHERE holder = $1 AND fence = $2 ORDER BY seq",
      ["holder-d", Number(held.fence)],
    );
    expect(log.rows.at(-1)).toEqual({ ended: true });
  });

  it("listen-kill ends the release feed's sessions and no other", async () => {
    const listener = await session("-c application_name=pglease-listen");
    await listener.query("LISTEN chaos");
    const ended = new Promise((resolve) => listener.once("end", resolve));
    const active = await inject(fault("listen-kill"));
    expect(active.detail).toBe("pg_terminate_backend of 1 LISTEN session(s)");
    await ended;
    expect((await admin.query("SELECT 1 AS one")).rows[0].one).toBe(1);
  });

  it("clock-step moves the server clock at once and back at the heal", async (context) => {
    if (!db.clock) {
      console.warn(`[chaos clock-step] skipped: ${db.clockMissing}`);
      context.skip();
    }
    const offset = async () =>
      Number((await admin.query("SELECT extract(epoch FROM clock_timestamp()) * 1000 AS t")).rows[0].t) -
      Date.now();
    const active = await inject(fault("clock-step", { stepMs: 3_000 }));
    expect(Math.abs((await offset()) - 3_000)).toBeLessThan(200);
    expect(active.serverEnded).toHaveLength(1);
    await active.heal();
    expect(Math.abs(await offset())).toBeLessThan(200);
    const back = await inject(fault("clock-step", { stepMs: -300 }));
    expect(Math.abs((await offset()) + 300)).toBeLessThan(200);
    await back.heal();
    // Within the safety margin: no term ends behind its holder's back.
    expect(back.serverEnded ?? []).toEqual([]);
  });
});
