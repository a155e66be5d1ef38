// The fence guard: a leader's writes to PostgreSQL go through one transaction that FIRST
// advances a guard row to the writer's fence and refuses if the row already holds a higher one.
// A lease only bounds the window in which two processes believe they lead; this is what closes
// it, because the rejection happens where the write lands, not where the belief lives.
import type { Pool, PoolClient } from "pg";
import { parseFence } from "../shared/fence-token.ts";
import { inTransaction } from "../shared/transaction.ts";
import { type FenceTable, fenceTable, migrateFenceTable, missingTableError } from "./guard-table.ts";
import { StaleFenceError } from "./stale-fence-error.ts";

export interface FenceGuardOptions {
  pool: Pool;
  /** Default "public". Must already exist. */
  schema?: string;
  /** Default "pglease_fences". */
  table?: string;
  /**
   * Longest wait for the guard row lock, in ms (PostgreSQL `lock_timeout`, transaction-local).
   * Unset waits as long as the writer ahead holds its transaction open.
   */
  lockTimeoutMs?: number;
  /**
   * Longest idle time between a guard transaction's statements, in ms (PostgreSQL
   * `idle_in_transaction_session_timeout`, transaction-local); past it PostgreSQL ends the session
   * and nothing of the transaction is written. It is what frees the guard row when a writer freezes
   * inside its transaction, so the next leader is not held up. Unset: 10000, or the shorter bound
   * already set on the role, database or session. Given: set as is (0 for no bound).
   */
  idleInTransactionTimeoutMs?: number;
}

export interface FencedWrite {
  /** Names what the fence protects: one guard row per resource, writers on it are serialized. */
  resource: string;
  /** The lease's fencing token for this term: a positive safe integer. */
  fence: number;
}

/** Runs inside the guard's transaction. Write only through `client`; do not COMMIT, ROLLBACK or release it. */
export type FencedCallback<T> = (client: PoolClient) => Promise<T>;

export interface FenceGuard {
  /** The guard table, `"schema"."table"`. */
  readonly table: string;
  /** Creates the guard table if missing; safe to call from every replica at once. */
  migrate(): Promise<void>;
  /** One transaction: advance the guard row to `fence` (or throw StaleFenceError), run `fn`, commit. */
  run<T>(resource: string, fence: number, fn: FencedCallback<T>): Promise<T>;
  /** The highest fence the resource has accepted, or null if nobody has written through the guard yet. */
  current(resource: string): Promise<number | null>;
}

// WHERE guard.fence <= EXCLUDED.fence: equal passes (one leader writes many times), lower gets no
// row; either way the row stays locked until the transaction ends, which serializes the writers.
const advanceGuardRow = (t: FenceTable) => `
  INSERT INTO ${t.qualified} AS guard (resource, fence) VALUES ($1::text, $2::bigint)
  ON CONFLICT (resource) DO UPDATE SET fence = EXCLUDED.fence, updated_at = clock_timestamp()
  WHERE guard.fence <= EXCLUDED.fence
  RETURNING fence`;

// Runs only after a refused advance, while this transaction still holds the row lock: the value
// read is exactly the fence that refused us.
const readGuardRow = (t: FenceTable) => `SELECT fence FROM ${t.qualified} WHERE resource = $1::text`;

// Explicit READ COMMITTED: the advance then waits for a concurrent writer and compares with its
// committed fence, instead of failing with a serialization error under a stricter session default.
// The idle bound: a writer frozen inside its transaction (a paused VM, a stopped process) holds
// the guard row lock until the server ends its session.
const beginTransaction = (lockTimeoutMs: number | undefined, idle: IdleBound) =>
  [
    "BEGIN ISOLATION LEVEL READ COMMITTED",
    idle.explicit ? `SET LOCAL idle_in_transaction_session_timeout = ${idle.ms}` : tightenIdleBound(idle.ms),
    ...(lockTimeoutMs === undefined ? [] : [`SET LOCAL lock_timeout = ${lockTimeoutMs}`]),
  ].join("; ");

// The default never loosens a bound already in force (the role's, the database's, the session's):
// it takes the shorter of the two, 0 there meaning none. is_local true: this transaction only.
const tightenIdleBound = (ms: number) => `SELECT set_config('idle_in_transaction_session_timeout',
    (SELECT CASE WHEN setting::bigint = 0 THEN ${ms} ELSE least(setting::bigint, ${ms}) END
       FROM pg_settings WHERE name = 'idle_in_transaction_session_timeout')::text, true)`;

interface IdleBound {
  ms: number;
  /** Given by the caller: set as is, even looser than the session's (0 turns it off). */
  explicit: boolean;
}

/** Past the lease's renewal interval at its defaults, short of its 15 s duration: see the option. */
const DEFAULT_IDLE_IN_TRANSACTION_TIMEOUT_MS = 10_000;
/** PostgreSQL's own ceiling for the setting (INT_MAX ms). */
const MAX_IDLE_MS = 2_147_483_647;
const UNDEFINED_TABLE = "42P01";
const IDLE_IN_TRANSACTION_TIMEOUT = "25P03";
const GUARD_ROW_FENCE = "fence guard: the guard row's fence";

export function createFenceGuard(options: FenceGuardOptions): FenceGuard {
  const { pool, lockTimeoutMs, idleInTransactionTimeoutMs: givenIdleMs } = options;
  if (!pool || typeof pool.connect !== "function") {
    throw new TypeError("fence guard: options.pool must be a pg.Pool (new pg.Pool({ connectionString }))");
  }
  if (lockTimeoutMs !== undefined && !(Number.isSafeInteger(lockTimeoutMs) && lockTimeoutMs > 0)) {
    throw new TypeError(
      `fence guard: lockTimeoutMs must be a positive whole number of milliseconds, got ${describe(lockTimeoutMs)}`,
    );
  }
  const idle: IdleBound = {
    ms: givenIdleMs ?? DEFAULT_IDLE_IN_TRANSACTION_TIMEOUT_MS,
    explicit: givenIdleMs !== undefined,
  };
  if (!(Number.isSafeInteger(idle.ms) && idle.ms >= 0 && idle.ms <= MAX_IDLE_MS)) {
    throw new TypeError(
      "fence guard: idleInTransactionTimeoutMs must be a whole number of milliseconds (0 for no bound), " +
        `at most ${MAX_IDLE_MS}, got ${describe(givenIdleMs)}`,
    );
  }
  const t = fenceTable(options.schema, options.table);
  const sql = {
    begin: beginTransaction(lockTimeoutMs, idle),
    advance: advanceGuardRow(t),
    read: readGuardRow(t),
  };

  async function run<T>(resource: string, fence: number, fn: FencedCallback<T>): Promise<T> {
    assertResource(resource);
    assertFence(fence);
    if (typeof fn !== "function")
      throw new TypeError("fence guard: the third argument must be an async function");
    return inTransaction(
      pool,
      async (client) => {
        await advanceOrThrow(client, resource, fence);
        return fn(client);
      },
      {
        begin: sql.begin,
        abortedError: abortedTransactionError,
        endedError: endedTransactionError,
        // The thrown error stays the cause: the callback's own (a service it awaited failing)
        // or the client's, whose connection PostgreSQL ended.
        failedError: (error, connectionError) =>
          [error, connectionError].some(isIdleTimeout) ? idleTimeoutError(idle, error) : undefined,
      },
    );
  }

  async function advanceOrThrow(client: PoolClient, resource: string, fence: number): Promise<void> {
    try {
      const advanced = await client.query(sql.advance, [resource, fence]);
      if (advanced.rowCount === 1) return;
      const { rows } = await client.query<{ fence: string }>(sql.read, [resource]);
      throw new StaleFenceError(resource, fence, parseFence(rows[0]?.fence, GUARD_ROW_FENCE));
    } catch (error) {
      throw isUndefinedTable(error) ? missingTableError(t, error) : error;
    }
  }

  return {
    table: t.qualified,
    migrate: () => migrateFenceTable(pool, t),
    run,
    async current(resource) {
      assertResource(resource);
      try {
        const { rows } = await pool.query<{ fence: string }>(sql.read, [resource]);
        return rows[0] ? parseFence(rows[0].fence, GUARD_ROW_FENCE) : null;
      } catch (error) {
        throw isUndefinedTable(error) ? missingTableError(t, error) : error;
      }
    },
  };
}

/** One fenced transaction on the default guard table (`public.pglease_fences`, or the schema/table given). */
export function withFence<T>(
  pool: Pool,
  write: FencedWrite & { schema?: string; table?: string },
  fn: FencedCallback<T>,
): Promise<T> {
  const guard = createFenceGuard({ pool, schema: write.schema, table: write.table });
  return guard.run(write.resource, write.fence, fn);
}

function endedTransactionError(): Error {
  return new Error(
    "fence guard: the callback ended the guard's transaction itself (COMMIT or ROLLBACK); anything written " +
      "after that was not fenced. Leave COMMIT and ROLLBACK to the guard: return to commit, throw to roll back.",
  );
}

function idleTimeoutError(idle: IdleBound, cause: unknown): Error {
  const bound = idle.explicit
    ? `idleInTransactionTimeoutMs (${idle.ms} ms)`
    : `its idle bound (idleInTransactionTimeoutMs, default ${idle.ms} ms, or a shorter ` +
      "idle_in_transaction_session_timeout set on the role, database or session)";
  return new Error(
    "fence guard: PostgreSQL ended the transaction after it sat idle between statements for more than " +
      `${bound}: nothing of it was written. Either this process was ` +
      "paused (and may no longer lead: read the fence again), or the callback awaited something other than " +
      "the database; do that work before the fenced transaction, or raise idleInTransactionTimeoutMs.",
    { cause },
  );
}

function abortedTransactionError(): Error {
  return new Error(
    "fence guard: a statement inside the callback failed and its error was caught, so PostgreSQL aborted the " +
      "transaction and nothing was written. Let the error propagate (or use a SAVEPOINT) instead of swallowing it.",
  );
}

function assertResource(resource: unknown): asserts resource is string {
  if (typeof resource !== "string" || resource.length === 0) {
    throw new TypeError(
      `fence guard: resource must be a non-empty string naming what the fence protects, got ${describe(resource)}`,
    );
  }
}

function assertFence(fence: unknown): asserts fence is number {
  if (typeof fence !== "number" || !Number.isSafeInteger(fence) || fence <= 0) {
    throw new TypeError(
      `fence guard: fence must be a positive safe integer (the lease's fencing token), got ${describe(fence)}; ` +
        "a missing fence means this process is not the leader, so it must not write",
    );
  }
}

const hasCode = (error: unknown, code: string): boolean =>
  typeof error === "object" && error !== null && (error as { code?: unknown }).code === code;

function isUndefinedTable(error: unknown): boolean {
  return hasCode(error, UNDEFINED_TABLE);
}

function isIdleTimeout(error: unknown): boolean {
  return hasCode(error, IDLE_IN_TRANSACTION_TIMEOUT);
}

function describe(value: unknown): string {
  if (typeof value === "string") return JSON.stringify(value);
  if (typeof value === "bigint") return `${value}n (a bigint; pass a number)`;
  return String(value);
}
