// Faults done to the one shared PostgreSQL, by another session as an operator or the server
// itself would: commits that wait for a standby that does not exist, an operator's row lock on the
// lease row, the row deleted, the table dropped and migrated again, the LISTEN sessions ended,
// the server clock stepped. Each returns what it did and how it heals.
import pg from "pg";
import { leaseTable, migrate } from "../../src/postgres/index.ts";
import type { ChaosCluster } from "./cluster.ts";
import type { InjectedFault } from "./history.ts";
import type { PlannedFault } from "./schedule.ts";

export type Active = Omit<InjectedFault, "healedAt"> & { heal(): Promise<number> };
type Base = Pick<InjectedFault, "kind" | "target" | "startedAt">;

const TABLE = leaseTable();

// Every commit then waits for a standby that never comes; the server's statement_timeout is
// off by then (it covers the statement, not the commit), so only the reset releases them.
const STALL_COMMITS = [
  "ALTER SYSTEM SET synchronous_standby_names = 'chaos_missing_standby'",
  "ALTER SYSTEM SET synchronous_commit = 'on'",
];
const UNSTALL_COMMITS = [
  "ALTER SYSTEM RESET synchronous_standby_names",
  "ALTER SYSTEM RESET synchronous_commit",
];
const RELOAD = "SELECT pg_reload_conf()";
// A commit waits for a synchronous standby only once the checkpointer has published the new
// synchronous_standby_names to shared memory; a backend that already shows the new setting can
// still commit at once before that (seen in CI). The checkpointer handles a pending reload before
// it runs a requested checkpoint, so this returns with the fault in force.
const PUBLISHED = "CHECKPOINT";
const COMMITS_WAITING = "SELECT count(*)::int AS n FROM pg_stat_activity WHERE wait_event = 'SyncRep'";

// FOR UPDATE: every claim, renew and release of the key queues behind this session.
const LOCK_ROW = `SELECT holder, fence::text FROM ${TABLE.qualified} WHERE key = $1 FOR UPDATE`;
const LOCK_WAITERS = `SELECT count(*)::int AS n FROM pg_stat_activity
  WHERE datname = current_database() AND wait_event_type = 'Lock' AND pid <> pg_backend_pid()`;

// A removed term is logged as ending where it began (expires_at = acquired_at): the server ended
// it at the removal, and a claim queued behind the removal may carry a clock read from before it.
const LOG_REMOVED = `INSERT INTO chaos_lease_log (key, holder, fence, acquired_at, expires_at)
  SELECT key, holder, fence, acquired_at, acquired_at FROM gone RETURNING holder, fence::text`;
const DELETE_ROW = `WITH gone AS (DELETE FROM ${TABLE.qualified} WHERE key = $1 RETURNING *) ${LOG_REMOVED}`;
// The table is the fault's before the rows are read: a renew that slipped in between the read and
// the DROP would commit its entry after the logged removal, the term renewed past its own end.
const LOCK_TABLE = `LOCK TABLE ${TABLE.qualified} IN ACCESS EXCLUSIVE MODE`;
const LOG_DROPPED = `WITH gone AS (SELECT * FROM ${TABLE.qualified}) ${LOG_REMOVED}`;
const DROP_TABLE = `DROP TABLE ${TABLE.qualified}`;

// Whoever makes the lease table again (this fault's migration, or a sidecar's own at start-up)
// gets the change-log trigger in the same transaction, so no claim goes unlogged.
const ATTACH_LOG_ON_CREATE = `
  CREATE OR REPLACE FUNCTION chaos_attach_lease_log() RETURNS event_trigger LANGUAGE plpgsql AS $$
  BEGIN
    IF EXISTS (SELECT 1 FROM pg_event_trigger_ddl_commands()
                WHERE command_tag = 'CREATE TABLE' AND object_identity = 'public.pglease_leases') THEN
      CREATE TRIGGER chaos_log_lease AFTER INSERT OR UPDATE ON public.pglease_leases
        FOR EACH ROW EXECUTE FUNCTION chaos_log_lease();
    END IF;
  END $$;
  DROP EVENT TRIGGER IF EXISTS chaos_attach_lease_log;
  CREATE EVENT TRIGGER chaos_attach_lease_log ON ddl_command_end WHEN TAG IN ('CREATE TABLE')
    EXECUTE FUNCTION chaos_attach_lease_log()`;

// application_name is the release feed's own: only the LISTEN sessions end.
const END_LISTENERS = `SELECT pg_terminate_backend(pid) FROM pg_stat_activity
  WHERE datname = current_database() AND application_name = 'pglease-listen'`;

async function session(url: string): Promise<pg.Client> {
  const client = new pg.Client({ connectionString: url });
  // A restart or a cut ends the session; the heal then reports it instead of crashing the run.
  client.on("error", () => {});
  await client.connect();
  return client;
}

const within = (from: number) => ({ from, to: Date.now() });

/**
 * Runs statements on a session of its own: a pooled connection may be one a PostgreSQL restart
 * (another fault) broke while it sat idle.
 */
async function once<T>(url: string, run: (client: pg.Client) => Promise<T>): Promise<T> {
  const client = await session(url);
  try {
    return await run(client);
  } finally {
    await client.end().catch(() => {});
  }
}

async function commitStall(url: string, base: Base, fault: PlannedFault): Promise<Active> {
  await once(url, async (c) => {
    for (const statement of [...STALL_COMMITS, RELOAD, PUBLISHED]) await c.query(statement);
  });
  const active: Active = {
    ...base,
    target: null,
    detail: `commits wait for a missing synchronous standby for ${fault.durationMs} ms`,
    heal: async () => {
      const waiting = await once(url, async (c) => {
        const n = (await c.query<{ n: number }>(COMMITS_WAITING)).rows[0]?.n ?? 0;
        for (const statement of [...UNSTALL_COMMITS, RELOAD]) await c.query(statement);
        return n;
      });
      active.detail += ` (${waiting} commits waiting at the heal)`;
      return Date.now();
    },
  };
  return active;
}

async function rowLock(url: string, key: string, base: Base, fault: PlannedFault): Promise<Active> {
  const client = await session(url);
  await client.query("BEGIN");
  const { rows } = await client.query<{ holder: string; fence: string }>(LOCK_ROW, [key]);
  const row = rows[0];
  const active: Active = {
    ...base,
    target: null,
    detail: row
      ? `SELECT … FOR UPDATE on the lease row (${row.holder}, fence ${row.fence}) held ${fault.durationMs} ms`
      : "skipped: no lease row to lock",
    heal: async () => {
      const waiting = (await client.query<{ n: number }>(LOCK_WAITERS)).rows[0]?.n ?? 0;
      await client.query("COMMIT");
      await client.end();
      if (row) active.detail += ` (${waiting} statements queued at the heal)`;
      return Date.now();
    },
  };
  return active;
}

async function rowDelete(url: string, key: string, base: Base): Promise<Active> {
  const client = await session(url);
  const sent = Date.now();
  const { rows } = await client
    .query<{ holder: string; fence: string }>(DELETE_ROW, [key])
    .finally(() => client.end().catch(() => {}));
  const gone = rows[0];
  return {
    ...base,
    target: null,
    detail: gone ? `DELETE of the lease row (${gone.holder}, fence ${gone.fence})` : "skipped: no lease row",
    ...(gone ? { serverEnded: [within(sent)] } : {}),
    heal: async () => Date.now(),
  };
}

let attached = false;

async function tableDrop(url: string, base: Base, fault: PlannedFault): Promise<Active> {
  if (!attached) {
    await once(url, (c) => c.query(ATTACH_LOG_ON_CREATE));
    attached = true;
  }
  const client = await session(url);
  const sent = Date.now();
  await client.query("BEGIN");
  await client.query(LOCK_TABLE);
  const logged = await client.query(LOG_DROPPED);
  await client.query(DROP_TABLE);
  await client.query("COMMIT");
  await client.end();
  // The holder's renews fail while the table is gone: it can learn that its term ended only
  // once the migration has made the table again, so the window runs until then.
  const active: Active = {
    ...base,
    target: null,
    detail: `DROP TABLE with ${logged.rowCount} row(s), migrated again after ${fault.durationMs} ms`,
    serverEnded: [within(sent)],
    heal: async () => {
      const pool = new pg.Pool({ connectionString: url, max: 1 });
      pool.on("error", () => {});
      try {
        await migrate(pool, TABLE);
      } finally {
        await pool.end();
      }
      active.serverEnded = [within(sent)];
      return Date.now();
    },
  };
  return active;
}

async function listenKill(url: string, base: Base): Promise<Active> {
  const { rowCount } = await once(url, (c) => c.query(END_LISTENERS));
  return {
    ...base,
    target: null,
    detail: `pg_terminate_backend of ${rowCount} LISTEN session(s)`,
    heal: async () => Date.now(),
  };
}

async function clockStep(cluster: ChaosCluster, base: Base, fault: PlannedFault): Promise<Active> {
  const clock = cluster.clock;
  if (!clock)
    return {
      ...base,
      target: null,
      detail: `skipped: ${cluster.clockMissing}`,
      heal: async () => Date.now(),
    };
  // A forward step beyond the safety margin ends terms early on the server: their holders learn
  // it from their next answer. Within the margin it must not matter at all.
  const beyondMargin = Math.abs(fault.stepMs) > cluster.settings.leaseMs / 3;
  const sent = Date.now();
  await clock.set(fault.stepMs);
  const forwardAtStart = beyondMargin && fault.stepMs > 0 ? [within(sent)] : [];
  const active: Active = {
    ...base,
    target: null,
    detail: `server clock stepped ${fault.stepMs > 0 ? "forward" : "back"} ${Math.abs(fault.stepMs)} ms for ${fault.durationMs} ms, then back`,
    serverEnded: forwardAtStart,
    heal: async () => {
      const undo = Date.now();
      await clock.set(0);
      if (beyondMargin && fault.stepMs < 0) active.serverEnded = [within(undo)];
      return Date.now();
    },
  };
  return active;
}

/** The faults of this module; null for a kind it does not do. */
export function injectDatabaseFault(
  cluster: ChaosCluster,
  fault: PlannedFault,
  base: Base,
): Promise<Active> | null {
  const url = cluster.postgres?.url;
  if (!url) throw new Error("faults: the cluster is not started");
  const key = cluster.settings.lease;
  switch (fault.kind) {
    case "commit-stall":
      return commitStall(url, base, fault);
    case "row-lock":
      return rowLock(url, key, base, fault);
    case "row-delete":
      return rowDelete(url, key, base);
    case "table-drop":
      return tableDrop(url, base, fault);
    case "listen-kill":
      return listenKill(url, base);
    case "clock-step":
      return clockStep(cluster, base, fault);
    default:
      return null;
  }
}
