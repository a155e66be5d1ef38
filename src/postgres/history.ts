// The history of every change of hands, written by triggers on the lease table inside the very
// statement that makes the change, whichever statement that is (a claim, a release, a batched
// release, an operator's UPDATE by hand). Renewals only lengthen the lease, and the triggers'
// WHEN clauses skip them, so they write nothing here. A statement that names itself set-based
// (the batched release) has its ended terms recorded by one statement-level trigger call over
// its transition tables instead of one row trigger call per lease: 10,000 releases in one
// statement took 10,000 PL/pgSQL calls and single-row INSERTs.
import type pg from "pg";
import { RESTART_PROOF_PATTERN } from "../election/identity.ts";
import { migratePrune, missingPrune } from "./history-prune.ts";
import type { LeaseTable } from "./table.ts";

/**
 * The words of the history table's `reason` column, and of the log lines of transitions. The
 * triggers infer the first ones from the old and new row; the statements of the others name
 * theirs with set_config('pglease.reason', …, true) (transaction-local, so it never outlives them).
 */
export const HISTORY_REASONS = {
  claim: "a free lease claimed: no row yet, or its last term was released",
  "expiry-takeover": "another holder's term expired and was taken over",
  "restart-takeover":
    "a live term taken over by the process restarted in its pod (its predecessor proven dead)",
  "session-takeover":
    "a live term taken over because its holder's database session was gone (--session-takeover)",
  "crash-takeover":
    "a live term taken over because the kubelet reported its holder's container terminated (--crash-takeover)",
  "new-term": "the same holder started a new term (after stepping down locally, or after its term expired)",
  handover: "the candidate a handover named claimed the lease during its reservation (pglease handover)",
  release: "the holder released its term",
  "forced-release": "an operator ended the term (pglease release)",
  deleted: "the lease row was deleted by hand",
} as const;

export type HistoryReason = keyof typeof HISTORY_REASONS;

/** The setting a statement uses to name its reason; the trigger reads it, the setting dies with the transaction. */
export const REASON_SETTING = "pglease.reason";
/** Set by the trigger for the claim's RETURNING clause, which runs after the row's BEFORE trigger. */
export const CHANGE_SETTING = "pglease.change";
/**
 * 'on': the terms this statement ends in place are recorded by the statement-level trigger, not
 * the row trigger. It only chooses which trigger records them, never whether: both WHEN clauses
 * read the same setting. Transaction-local, set by the statement itself.
 */
export const SET_BASED_SETTING = "pglease.set_based";
const SET_BASED = `current_setting('${SET_BASED_SETTING}', true) = 'on'`;

const createHistoryTable = (t: LeaseTable) => `
  CREATE TABLE IF NOT EXISTS ${t.history.table} (
    id              BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    key             TEXT NOT NULL,
    fence           BIGINT NOT NULL,
    -- Who holds the lease after the change; NULL when the change ended a term.
    holder          TEXT,
    previous_holder TEXT,
    reason          TEXT NOT NULL,
    changed_at      TIMESTAMPTZ NOT NULL
  )`;

// The index an older pglease built for the trigger's look for a term's release. The look reads the
// key's newest entry through the pruning index on (key, id DESC) instead, so every change of hands
// writes one index fewer (a batched release of 10,000 terms, 10,000 entries fewer); the migration drops it.
const keyFenceIndex = (t: LeaseTable) => `"${t.schema}"."${t.history.name}_key_fence"`;

// What tells the record function of this version from an older one (which looks for a term's
// release through the (key, fence) index).
const RECORD_FUNCTION_MARK = "the newest entry of the key";

/**
 * SECURITY DEFINER: the lease role needs no privilege on the history, so an existing deployment's
 * grants keep working and the lease role cannot rewrite the record. The search_path is pinned.
 */
export const createRecordFunction = (t: LeaseTable) => `
  CREATE OR REPLACE FUNCTION ${t.history.recordFunction}() RETURNS trigger
  LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $fn$
  DECLARE
    named text := nullif(current_setting('${REASON_SETTING}', true), '');
    why text;
  BEGIN
    IF TG_OP = 'INSERT' THEN
      INSERT INTO ${t.history.table} (key, fence, holder, previous_holder, reason, changed_at)
      VALUES (NEW.key, NEW.fence, NEW.holder, NULL, coalesce(named, 'claim'), clock_timestamp());
      RETURN NULL;
    END IF;
    IF TG_OP = 'DELETE' THEN
      INSERT INTO ${t.history.table} (key, fence, holder, previous_holder, reason, changed_at)
      VALUES (OLD.key, OLD.fence, NULL, OLD.holder, coalesce(named, 'deleted'), clock_timestamp());
      RETURN OLD;
    END IF;
    IF NEW.fence = OLD.fence AND NEW.holder = OLD.holder THEN
      -- Same term, shorter expiry: the term ended in place.
      INSERT INTO ${t.history.table} (key, fence, holder, previous_holder, reason, changed_at)
      VALUES (OLD.key, OLD.fence, NULL, OLD.holder, coalesce(named, 'release'), clock_timestamp());
      RETURN NEW;
    END IF;
    why := coalesce(named, CASE
      -- The named candidate claimed within its reservation (pglease handover).
      WHEN OLD.reserved_for = NEW.holder AND OLD.reserved_until > NEW.acquired_at THEN 'handover'
      -- By ${RECORD_FUNCTION_MARK}: the change before this one ended OLD's term, so the lease was free.
      -- Entries of a key are written under its row lock, so their ids follow its changes; every
      -- prune keeps a key's newest entry. One descent of the (key, id DESC) index.
      WHEN (SELECT h.holder IS NULL AND h.fence = OLD.fence FROM ${t.history.table} h
             WHERE h.key = OLD.key ORDER BY h.id DESC LIMIT 1) THEN 'claim'
      WHEN NEW.holder = OLD.holder THEN 'new-term'
      WHEN OLD.expires_at <= NEW.acquired_at THEN 'expiry-takeover'
      -- A live term changed hands: a proven-dead predecessor (the claim's restart or session clause).
      WHEN (regexp_match(OLD.holder, '${RESTART_PROOF_PATTERN}'))[1] = (regexp_match(NEW.holder, '${RESTART_PROOF_PATTERN}'))[1]
        THEN 'restart-takeover'
      ELSE 'session-takeover' END);
    INSERT INTO ${t.history.table} (key, fence, holder, previous_holder, reason, changed_at)
    VALUES (NEW.key, NEW.fence, NEW.holder, OLD.holder, why, clock_timestamp());
    -- For the claim's RETURNING (the log line), in the same words; local to this transaction.
    PERFORM set_config('${CHANGE_SETTING}', json_build_object('reason', why, 'previous_holder', OLD.holder)::text, true);
    RETURN NEW;
  END $fn$`;

/**
 * The statement-level twin of the row function's "term ended in place" branch, set-based: one
 * call and one INSERT for every row the statement ended. SECURITY DEFINER like the row function.
 * The transition tables carry no statistics: without enable_nestloop off the planner may join
 * 10,000 old rows to 10,000 new ones by a nested loop (measured: 30 s).
 */
export const createRecordEndedFunction = (t: LeaseTable) => `
  CREATE OR REPLACE FUNCTION ${t.history.recordEndedFunction}() RETURNS trigger
  LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp SET enable_nestloop = off AS $fn$
  BEGIN
    INSERT INTO ${t.history.table} (key, fence, holder, previous_holder, reason, changed_at)
    SELECT o.key, o.fence, NULL, o.holder,
           coalesce(nullif(current_setting('${REASON_SETTING}', true), ''), 'release'), clock_timestamp()
      FROM ended_old o JOIN ended_new n ON n.key = o.key
     -- The same test as the row trigger's: same term, shorter expiry. Claims (fence or holder
     -- changed) stay with the row trigger, whose answer the claim's RETURNING reads.
     WHERE n.fence = o.fence AND n.holder = o.holder AND n.expires_at < o.expires_at
     ORDER BY o.key;
    RETURN NULL;
  END $fn$`;

// Only inserts that happened: an INSERT … ON CONFLICT that updates instead fires no AFTER INSERT.
const createInsertTrigger = (t: LeaseTable) => `
  CREATE TRIGGER pglease_history_insert AFTER INSERT ON ${t.qualified}
  FOR EACH ROW EXECUTE FUNCTION ${t.history.recordFunction}()`;

// BEFORE, so the claim's RETURNING can tell the reason. The WHEN clause keeps renewals out: they
// keep holder and fence and never shorten the expiry; and the terms a set-based statement ends,
// which pglease_history_ended records.
const createUpdateTrigger = (t: LeaseTable) => `
  CREATE TRIGGER pglease_history_update BEFORE UPDATE ON ${t.qualified}
  FOR EACH ROW WHEN (OLD.fence IS DISTINCT FROM NEW.fence OR OLD.holder IS DISTINCT FROM NEW.holder
                     OR (NEW.expires_at < OLD.expires_at AND NOT coalesce(${SET_BASED}, false)))
  EXECUTE FUNCTION ${t.history.recordFunction}()`;

// What tells the update trigger of this version from an older one (which records every row).
const UPDATE_TRIGGER_MARK = SET_BASED_SETTING;

// The WHEN clause is evaluated once per statement, so a renewal pays no call; it still fills the
// transition tables (a copy of each renewed row, kept in memory), which no PL/pgSQL ever reads.
const createEndedTrigger = (t: LeaseTable) => `
  CREATE TRIGGER pglease_history_ended AFTER UPDATE ON ${t.qualified}
  REFERENCING OLD TABLE AS ended_old NEW TABLE AS ended_new
  FOR EACH STATEMENT WHEN (coalesce(${SET_BASED}, false))
  EXECUTE FUNCTION ${t.history.recordEndedFunction}()`;

const createDeleteTrigger = (t: LeaseTable) => `
  CREATE TRIGGER pglease_history_delete AFTER DELETE ON ${t.qualified}
  FOR EACH ROW EXECUTE FUNCTION ${t.history.recordFunction}()`;

const TRIGGER_NAMES = [
  "pglease_history_insert",
  "pglease_history_update",
  "pglease_history_delete",
  "pglease_history_ended",
];

// tgisinternal excludes constraint triggers; names are per table. An update trigger without the
// mark is an older pglease's, which would record a set-based statement's ended terms a second time.
const FIND_HISTORY = `
  SELECT to_regclass($1) IS NOT NULL AS table_present,
         to_regprocedure($2) IS NOT NULL AS record_present,
         to_regprocedure($5) IS NOT NULL AS record_ended_present,
         coalesce(strpos((SELECT prosrc FROM pg_proc WHERE oid = to_regprocedure($2)), $7) > 0, false) AS record_current,
         to_regclass($8) IS NOT NULL AS key_fence_present,
         -- CREATE OR REPLACE needs the function's owner and CREATE on its schema; DROP INDEX the table's owner.
         coalesce((SELECT pg_has_role(proowner, 'USAGE') AND has_schema_privilege(pronamespace, 'CREATE')
                     FROM pg_proc WHERE oid = to_regprocedure($2)), false) AS record_replaceable,
         coalesce((SELECT pg_has_role(relowner, 'USAGE') FROM pg_class WHERE oid = to_regclass($8)), false) AS key_fence_owned,
         (SELECT array_agg(tgname::text ORDER BY tgname) FROM pg_trigger
           WHERE tgrelid = to_regclass($3) AND NOT tgisinternal AND tgname = ANY($4)
             AND (tgname <> 'pglease_history_update' OR strpos(pg_get_triggerdef(oid), $6) > 0)) AS triggers,
         EXISTS (SELECT 1 FROM pg_trigger WHERE tgrelid = to_regclass($3) AND NOT tgisinternal
                    AND tgname = 'pglease_history_update' AND strpos(pg_get_triggerdef(oid), $6) = 0) AS update_outdated`;

interface Found {
  table_present: boolean;
  record_present: boolean;
  record_ended_present: boolean;
  record_current: boolean;
  key_fence_present: boolean;
  record_replaceable: boolean;
  key_fence_owned: boolean;
  triggers: string[] | null;
  update_outdated: boolean;
}

async function findHistory(client: Pick<pg.ClientBase, "query">, t: LeaseTable): Promise<Found> {
  const { rows } = await client.query<Found>(FIND_HISTORY, [
    t.history.table,
    `${t.history.recordFunction}()`,
    t.qualified,
    TRIGGER_NAMES,
    `${t.history.recordEndedFunction}()`,
    UPDATE_TRIGGER_MARK,
    RECORD_FUNCTION_MARK,
    keyFenceIndex(t),
  ]);
  const [found] = rows;
  if (!found) throw new Error("the history lookup returned no row");
  return found;
}

/** What is missing of the history, by name; empty when complete. */
export async function missingHistory(client: Pick<pg.ClientBase, "query">, t: LeaseTable): Promise<string[]> {
  const found = await findHistory(client, t);
  const triggers = new Set(found.triggers ?? []);
  return [
    found.table_present ? null : `table ${t.history.table}`,
    found.record_present ? null : `function ${t.history.recordFunction}`,
    found.record_ended_present ? null : `function ${t.history.recordEndedFunction}`,
    ...(await missingPrune(client, t)),
    ...TRIGGER_NAMES.map((name) =>
      triggers.has(name)
        ? null
        : name === "pglease_history_update" && found.update_outdated
          ? `trigger ${name} of this version`
          : `trigger ${name}`,
    ),
  ].filter((m): m is string => m !== null);
}

// The drop's ACCESS EXCLUSIVE lock waits behind any reader of the history (pg_dump, a long report),
// and every change of hands queues behind the drop: wait this long at most, far below the lease
// statements' timeout. The index only costs a write; a migration that finds it free drops it.
const DROP_LOCK_TIMEOUT = "200ms";
const READ_LOCK_TIMEOUT = "SELECT current_setting('lock_timeout') AS value";
const SET_LOCK_TIMEOUT = "SELECT set_config('lock_timeout', $1, true)";
const LOCK_NOT_AVAILABLE = "55P03";

/** Drops the older pglease's (key, fence) index if its lock comes at once; otherwise leaves it. */
async function dropKeyFenceIndex(client: Pick<pg.ClientBase, "query">, t: LeaseTable): Promise<void> {
  const { rows } = await client.query<{ value: string }>(READ_LOCK_TIMEOUT);
  // A savepoint: the lock timeout aborts only the drop, not the migration.
  await client.query("SAVEPOINT pglease_drop_key_fence");
  try {
    await client.query(SET_LOCK_TIMEOUT, [DROP_LOCK_TIMEOUT]);
    await client.query(`DROP INDEX ${keyFenceIndex(t)}`);
    await client.query("RELEASE SAVEPOINT pglease_drop_key_fence");
  } catch (error) {
    if ((error as { code?: string }).code !== LOCK_NOT_AVAILABLE) throw error;
    await client.query("ROLLBACK TO SAVEPOINT pglease_drop_key_fence");
  }
  // The rest of the migration waits as long as before.
  await client.query(SET_LOCK_TIMEOUT, [rows[0]?.value ?? "0"]);
}

/**
 * Inside the migration's transaction: creates only what is missing, so a table made by an older
 * pglease gains history, and a migration that finds it complete takes no lock on the lease table
 * (CREATE TRIGGER would block renewals while the migration lasts).
 */
export async function migrateHistory(client: Pick<pg.ClientBase, "query">, t: LeaseTable): Promise<void> {
  const found = await findHistory(client, t);
  if (!found.table_present) await client.query(createHistoryTable(t));
  if (!found.record_ended_present) await client.query(createRecordEndedFunction(t));
  // The (key, id DESC) index the record function of this version reads is built here.
  await migratePrune(client, t);
  // An older pglease's function stays correct beside its index: a lease role that may not replace
  // it (a replica starting with migrations on) leaves both for the owner's migration.
  const replace = !found.record_current && (!found.record_present || found.record_replaceable);
  if (replace) await client.query(createRecordFunction(t));
  // Only once no function reads it (an older pglease's, replaced just above, did); an older
  // pglease migrating later builds it only with a new table, and finds its function present.
  if (found.key_fence_present && found.key_fence_owned && (found.record_current || replace))
    await dropKeyFenceIndex(client, t);
  // An older pglease's update trigger is replaced in this transaction: no statement sees neither.
  if (found.update_outdated) await client.query(`DROP TRIGGER pglease_history_update ON ${t.qualified}`);
  const triggers = new Set(found.triggers ?? []);
  const create = [createInsertTrigger, createUpdateTrigger, createDeleteTrigger, createEndedTrigger];
  for (const [i, name] of TRIGGER_NAMES.entries()) {
    if (!triggers.has(name)) await client.query(create[i]?.(t) ?? "");
  }
}
