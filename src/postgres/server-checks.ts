// What the lease guarantees assume of the server, inspected once at start: a primary (a standby
// cannot take a claim), commits that survive a crash and a failover (synchronous_commit at least
// `on`, no asynchronous standby a failover could promote), and server-side timeouts no longer
// than the caller's, so a statement given up on cannot commit later. Facts plus sentences: the
// caller decides what refuses to start and what is only said.
import type pg from "pg";

export interface ServerFacts {
  inRecovery: boolean;
  synchronousCommit: string;
  synchronousStandbyNames: string;
  /**
   * Physical replication connections attached (pg_stat_replication rows, logical decoding left
   * out). Every role sees that they exist; only superusers and members of pg_read_all_stats (or
   * pg_monitor) see their sync_state.
   */
  standbys: number;
  /** Of those, replicating asynchronously (sync_state async or potential); null when hidden from this role. */
  asynchronousStandbys: number | null;
  /** The session's effective timeouts, in ms; 0 means none. */
  statementTimeoutMs: number;
  lockTimeoutMs: number;
}

export interface ServerCheck {
  facts: ServerFacts;
  /** Reasons not to campaign at all. */
  refusals: string[];
  /** Risks to state at start, each naming its fix. */
  warnings: string[];
}

// pg_settings gives both timeouts in ms whatever unit they were set in. A walsender connected to a
// database serves logical decoding (no failover target), from its connection on: its slot names it
// only once it streams. pg_stat_activity shows every role each session's database.
const INSPECT_SERVER = `
  WITH senders AS (
    SELECT r.sync_state FROM pg_stat_replication r
     WHERE NOT EXISTS (SELECT 1 FROM pg_stat_activity a WHERE a.pid = r.pid AND a.datname IS NOT NULL)
  )
  SELECT pg_is_in_recovery() AS in_recovery,
         current_setting('synchronous_commit') AS synchronous_commit,
         current_setting('synchronous_standby_names') AS synchronous_standby_names,
         (SELECT setting::bigint FROM pg_settings WHERE name = 'statement_timeout') AS statement_timeout_ms,
         (SELECT setting::bigint FROM pg_settings WHERE name = 'lock_timeout') AS lock_timeout_ms,
         (SELECT count(*) FROM senders)::int AS standbys,
         (SELECT count(*) FROM senders WHERE sync_state IN ('async', 'potential'))::int AS async_standbys,
         (SELECT count(*) FROM senders WHERE sync_state IS NULL)::int AS hidden_standbys,
         current_user AS role`;

interface Inspected {
  in_recovery: boolean;
  synchronous_commit: string;
  synchronous_standby_names: string;
  statement_timeout_ms: string;
  lock_timeout_ms: string;
  standbys: number;
  async_standbys: number;
  hidden_standbys: number;
  role: string;
}

const BELOW_ON = new Set(["off", "local", "remote_write"]);

/** Inspects the server the pool reaches, as the pool's role; `callTimeoutMs` is the elector's. */
export async function checkServer(pool: Pick<pg.Pool, "query">, callTimeoutMs: number): Promise<ServerCheck> {
  const { rows } = await pool.query<Inspected>(INSPECT_SERVER);
  const row = rows[0];
  if (!row) throw new Error("the server answered no row to its inspection");
  const facts: ServerFacts = {
    inRecovery: row.in_recovery,
    synchronousCommit: row.synchronous_commit,
    synchronousStandbyNames: row.synchronous_standby_names,
    standbys: row.standbys,
    asynchronousStandbys: row.hidden_standbys > 0 ? null : row.async_standbys,
    statementTimeoutMs: Number(row.statement_timeout_ms),
    lockTimeoutMs: Number(row.lock_timeout_ms),
  };
  const refusals = facts.inRecovery
    ? [
        "the server is a standby in recovery: it cannot take a claim. Point the connection at the primary " +
          "(CloudNativePG's -rw service, Patroni's leader endpoint)",
      ]
    : [];
  const warnings = [
    commitProblem(facts, row.role),
    replicationProblem(facts, row.hidden_standbys),
    timeoutProblem("statement_timeout", facts.statementTimeoutMs, callTimeoutMs, row.role),
    timeoutProblem("lock_timeout", facts.lockTimeoutMs, callTimeoutMs, row.role),
  ].filter((w): w is string => w !== null);
  return { facts, refusals, warnings };
}

function commitProblem(facts: ServerFacts, role: string): string | null {
  if (!BELOW_ON.has(facts.synchronousCommit)) return null;
  const loss =
    facts.synchronousCommit === "off"
      ? "a server crash can lose an acknowledged claim"
      : "a failover can lose an acknowledged claim";
  return (
    `synchronous_commit is ${facts.synchronousCommit} for role ${role}: ${loss} and hand its fence out twice; ` +
    `set it to on (ALTER ROLE "${role}" SET synchronous_commit = on)`
  );
}

function replicationProblem(facts: ServerFacts, hidden: number): string | null {
  const risk =
    "a failover to such a standby can lose acknowledged claims and hand a fence out twice; make the failover " +
    "target synchronous (synchronous_standby_names, Patroni synchronous_mode, CloudNativePG minSyncReplicas)";
  if (facts.asynchronousStandbys) {
    return `${facts.asynchronousStandbys} standby(s) replicate asynchronously: ${risk}`;
  }
  if (hidden === 0) return null;
  if (facts.synchronousStandbyNames === "") {
    return `${hidden} standby(s) attached and synchronous_standby_names is empty, so all replicate asynchronously: ${risk}`;
  }
  return (
    `${hidden} standby(s) attached, and this role cannot see which are synchronous (grant it pg_monitor to ` +
    `check): if the failover target is not, ${risk}`
  );
}

function timeoutProblem(name: string, valueMs: number, callTimeoutMs: number, role: string): string | null {
  if (valueMs > 0 && valueMs <= callTimeoutMs) return null;
  const now = valueMs === 0 ? "not set" : `${valueMs} ms, above the call timeout of ${callTimeoutMs} ms`;
  return (
    `${name} is ${now} on lease connections: a statement its caller gave up on keeps running on the server ` +
    `and may still commit. Set it at most ${callTimeoutMs} ms: createLeasePool({ statementTimeoutMs }) does, ` +
    `or behind a transaction-mode PgBouncer ALTER ROLE "${role}" SET ${name} = '${callTimeoutMs}ms' ` +
    "(PgBouncer's server connections pick it up when they reconnect)"
  );
}
