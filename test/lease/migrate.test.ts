import pg from "pg";
import { afterAll, beforeAll, expect, it } from "vitest";
import {
  assertTablePresent,
  LeaseTableMissingError,
  MIGRATION_LOCK_ID,
  migrate,
} from "../../src/postgres/migrate.ts";
import { leaseTable } from "../../src/postgres/table.ts";
import { createTestDatabase, type TestDatabase } from "../support/postgres/database.ts";

let db: TestDatabase;
beforeAll(async () => {
  db = await createTestDatabase();
});
afterAll(async () => {
  await db.drop();
});

it("ten replicas migrating at once all succeed and the table is created once", async () => {
  const table = leaseTable("leases_ten", "leases");
  const pools = Array.from({ length: 10 }, () => new pg.Pool({ connectionString: db.url, max: 1 }));
  const [first] = pools;
  if (!first) throw new Error("no pool");
  try {
    await Promise.all(pools.map((p) => migrate(p, table)));
    const { rows } = await first.query(
      "SELECT count(*)::int AS n FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = 'leases_ten' AND c.relname = 'leases'",
    );
    expect(rows[0].n).toBe(1);
    const columns = await first.query(
      "SELECT column_name FROM information_schema.columns WHERE table_schema = 'leases_ten' AND table_name = 'leases' ORDER BY ordinal_position",
    );
    expect(columns.rows.map((r) => r.column_name)).toEqual([
      "key",
      "holder",
      "fence",
      "acquired_at",
      "expires_at",
      "session_fence",
      "session_pid",
      "session_started_at",
      "session_server_started_at",
      "reserved_for",
      "reserved_until",
    ]);
    await migrate(first, table);
  } finally {
    await Promise.all(pools.map((p) => p.end()));
  }
});

it("a missing table without migrations is a clear error", async () => {
  const pool = new pg.Pool({ connectionString: db.url, max: 1 });
  try {
    const error = await assertTablePresent(pool, leaseTable("public", "absent")).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(LeaseTableMissingError);
    expect(String(error)).toMatch(/public\.absent does not exist.*pglease migrate/);
  } finally {
    await pool.end();
  }
});

it("a table made before the session columns gets them from a migration, and says so without one", async () => {
  const owner = new pg.Pool({ connectionString: db.url, max: 1 });
  const table = leaseTable("before_sessions", "leases");
  try {
    await migrate(owner, table);
    await owner.query(
      "ALTER TABLE before_sessions.leases DROP COLUMN session_fence, DROP COLUMN session_pid, DROP COLUMN session_started_at, DROP COLUMN session_server_started_at",
    );
    await owner.query(
      "INSERT INTO before_sessions.leases VALUES ('kept', 'h', 7, now(), now() + interval '1 minute')",
    );
    await expect(assertTablePresent(owner, table)).rejects.toThrow(
      /before_sessions\.leases lacks columns of this version \(session_fence, .*reserved_until; .*run `pglease migrate` once as the table's owner/,
    );
    await migrate(owner, table);
    await assertTablePresent(owner, table);
    const { rows } = await owner.query("SELECT holder, fence::int, session_pid FROM before_sessions.leases");
    expect(rows).toEqual([{ holder: "h", fence: 7, session_pid: null }]);
  } finally {
    await owner.end();
  }
});

it("rejects identifiers that are not plain names, naming the field", () => {
  expect(() => leaseTable('x"; DROP', "ok")).toThrow(/schema must be a plain PostgreSQL identifier/);
  expect(() => leaseTable("ok", "1table")).toThrow(/table must be a plain PostgreSQL identifier/);
});

it("an existing table is used by a role that may not create tables", async () => {
  const owner = new pg.Pool({ connectionString: db.url, max: 1 });
  const table = leaseTable("public", "pglease_leases");
  try {
    await migrate(owner, table);
    await owner.query(
      "DO $$ BEGIN CREATE ROLE pglease_user LOGIN PASSWORD 'pw'; EXCEPTION WHEN duplicate_object THEN NULL; END $$",
    );
    await owner.query("REVOKE CREATE ON SCHEMA public FROM PUBLIC");
    await owner.query("GRANT SELECT, INSERT, UPDATE ON public.pglease_leases TO pglease_user");
    await owner.query("GRANT USAGE ON SEQUENCE public.pglease_leases_fence TO pglease_user");
    const url = new URL(db.url);
    url.username = "pglease_user";
    url.password = "pw";
    const restricted = new pg.Pool({ connectionString: url.toString(), max: 1 });
    try {
      await migrate(restricted, table);
      await expect(migrate(restricted, leaseTable("public", "another"))).rejects.toThrow(/permission denied/);
    } finally {
      await restricted.end();
    }
  } finally {
    await owner.end();
  }
});

it("a connection that dies during the migration fails it, is not pooled again, and crashes nothing", async () => {
  const table = leaseTable("public", "dying_migration");
  const pool = new pg.Pool({ connectionString: db.url, max: 1, application_name: "pglease-dying-migration" });
  const holder = new pg.Client({ connectionString: db.url });
  const admin = new pg.Client({ connectionString: db.url });
  await Promise.all([holder.connect(), admin.connect()]);
  try {
    // Another replica's migration holds the lock: this one waits inside its transaction.
    await holder.query("BEGIN");
    await holder.query("SELECT pg_advisory_xact_lock($1)", [MIGRATION_LOCK_ID]);
    const migrating = migrate(pool, table).catch((error: unknown) => error);
    await expect
      .poll(async () => {
        // Not on `holder`: inside a transaction pg_stat_activity is a snapshot taken at its first read.
        const { rows } = await admin.query(
          "SELECT pg_terminate_backend(pid) AS done FROM pg_stat_activity WHERE application_name = 'pglease-dying-migration' AND wait_event_type = 'Lock'",
        );
        return rows.length;
      })
      .toBe(1);
    expect(await migrating).toMatchObject({ code: "57P01" });
    await holder.query("ROLLBACK");
    await expect.poll(() => pool.totalCount).toBe(0);
    await migrate(pool, table);
    await assertTablePresent(pool, table);
  } finally {
    await Promise.all([holder.end(), admin.end()]);
    await pool.end();
  }
});

it("the lease table keeps half of each page free, and a table made with the earlier fillfactor gets it from the owner's migration, once", async () => {
  const pool = new pg.Pool({ connectionString: db.url, max: 1 });
  const reloptions = async (name: string) =>
    (
      await pool.query<{ o: string[] | null }>(
        "SELECT reloptions AS o FROM pg_class WHERE oid = to_regclass($1)",
        [name],
      )
    ).rows[0]?.o;
  try {
    await migrate(pool, leaseTable("fill_new", "leases"));
    expect(await reloptions("fill_new.leases")).toEqual(["fillfactor=50"]);
    const earlier = leaseTable("fill_old", "leases");
    await migrate(pool, earlier);
    await pool.query("ALTER TABLE fill_old.leases SET (fillfactor = 90)");
    await migrate(pool, earlier);
    expect(await reloptions("fill_old.leases")).toEqual(["fillfactor=50"]);
    // Found as it should be: the catalog row is not written again.
    const version = async () =>
      (await pool.query("SELECT xmin::text AS x FROM pg_class WHERE oid = 'fill_old.leases'::regclass"))
        .rows[0]?.x;
    const upgraded = await version();
    await migrate(pool, earlier);
    expect(await version()).toBe(upgraded);
  } finally {
    await pool.end();
  }
});

it("a fillfactor the operator chose for the lease table is kept by every migration; only the earlier version's 90 is raised", async () => {
  const pool = new pg.Pool({ connectionString: db.url, max: 1 });
  const table = leaseTable("fill_chosen", "leases");
  try {
    await migrate(pool, table);
    await pool.query(
      "ALTER TABLE fill_chosen.leases SET (fillfactor = 70, autovacuum_vacuum_scale_factor = 0.01)",
    );
    await migrate(pool, table);
    const { rows } = await pool.query<{ o: string[] | null }>(
      "SELECT reloptions AS o FROM pg_class WHERE oid = 'fill_chosen.leases'::regclass",
    );
    expect(rows[0]?.o).toEqual(["fillfactor=70", "autovacuum_vacuum_scale_factor=0.01"]);
  } finally {
    await pool.end();
  }
});
