// Keeping the history bounded at any size: every prune statement is an index range, bounded by a
// batch, on the history alone (never the lease table), and skips the entries another prune holds,
// so a claim, whose trigger only inserts, never waits for it. Ranking the whole history instead
// read every entry per statement: 511,004 tuples at 10,000 keys × 50 entries, and past a 2.5 s
// statement timeout at 10,000 × 1,000 (test/lease/history-prune-scale.test.ts, docs/reference.md).
import type pg from "pg";
import type { LeaseTable } from "./table.ts";

export interface HistoryRetention {
  /** Entries older than this are pruned (the newest of each key always stays). */
  maxAgeMs: number;
  /** At most this many entries per key. */
  maxRowsPerKey: number;
}

// The age prune walks this index from its oldest end; the walk per key reads the other newest first.
const createIndexes = (t: LeaseTable) => [
  `CREATE INDEX IF NOT EXISTS "${t.history.changedAtIndex}" ON ${t.history.table} (changed_at)`,
  `CREATE INDEX IF NOT EXISTS "${t.history.keyIdIndex}" ON ${t.history.table} (key, id DESC)`,
];

/** Keys passed over (not grown) per key read, in one page of the walk. */
const SKIPS_PER_READ = 100;

// SECURITY DEFINER (every function): the lease role prunes without DELETE on the history.
// Resumes at from_changed_at, where the batch before stopped: the entries that batch deleted stay
// in the index until a vacuum may remove them, which a snapshot older than the delete (any open
// transaction in the database) forbids, and a range from the oldest end read them all again, one
// batch more each time (102,006 tuples in the 100th batch of a run at 10,000 keys × 50 entries).
const createAgedFunction = (t: LeaseTable) => `
  CREATE OR REPLACE FUNCTION ${t.history.pruneAgedFunction}(max_age_ms bigint, batch integer, from_changed_at timestamptz,
    OUT pruned bigint, OUT last_changed_at timestamptz)
  LANGUAGE sql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $fn$
    WITH doomed AS (
      SELECT h.id, h.changed_at FROM ${t.history.table} h
       -- A subquery, evaluated once: a bound the index scan stops at (clock_timestamp() alone is volatile, a mere filter).
       WHERE h.changed_at < (SELECT clock_timestamp() - max_age_ms * interval '1 millisecond')
         -- Where the batch before stopped (NULL: from the oldest); >=, as entries may share an instant.
         AND (from_changed_at IS NULL OR h.changed_at >= from_changed_at)
         -- Each key's newest entry stays: it tells the claim's trigger whether the last term was released.
         AND EXISTS (SELECT 1 FROM ${t.history.table} n WHERE n.key = h.key AND n.id > h.id)
       ORDER BY h.changed_at LIMIT batch
       -- Another prune's entries are skipped, never waited for.
       FOR UPDATE SKIP LOCKED
    ),
    gone AS (DELETE FROM ${t.history.table} h USING doomed WHERE h.id = doomed.id RETURNING doomed.changed_at)
    SELECT count(*), max(changed_at) FROM gone
  $fn$`;

// What replicas of the version before call: the same prune from the oldest end.
const createPreviousAgedFunction = (t: LeaseTable) => `
  CREATE OR REPLACE FUNCTION ${t.history.pruneAgedFunction}(max_age_ms bigint, batch integer)
  RETURNS bigint LANGUAGE sql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $fn$
    SELECT pruned FROM ${t.history.pruneAgedFunction}(max_age_ms, batch, NULL)
  $fn$`;

/**
 * Walks the keys after after_key (NULL: from the first), cutting each to its newest max_rows, and
 * reads at most key_count keys' newest entries, deleting at most `batch` in all; a key without an
 * entry above since_id has not grown since it was last cut and costs one index descent. next_key is
 * where the next call resumes: the last key done, so a key the batch cut short is visited again.
 * high_id is the newest entry's id, for the caller's next since_id.
 */
const createCrowdedFunction = (t: LeaseTable) => `
  CREATE OR REPLACE FUNCTION ${t.history.pruneCrowdedFunction}(
    max_rows integer, since_id bigint, after_key text, key_count integer, batch integer,
    OUT next_key text, OUT done boolean, OUT pruned bigint, OUT high_id bigint)
  LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $fn$
  DECLARE
    k text := after_key;
    doomed bigint;
    deleted bigint;
    read integer := 0;
  BEGIN
    SELECT max(h.id) INTO high_id FROM ${t.history.table} h;
    next_key := after_key;
    done := false;
    pruned := 0;
    FOR visit IN 1..key_count * ${SKIPS_PER_READ} LOOP
      -- One descent of the (key, id) index per key, however many entries each key has.
      IF k IS NULL THEN
        SELECT min(h.key) INTO k FROM ${t.history.table} h;
      ELSE
        SELECT min(h.key) INTO k FROM ${t.history.table} h WHERE h.key > k;
      END IF;
      IF k IS NULL THEN
        done := true;
        RETURN;
      END IF;
      -- The key's newest entry first in the index: one entry tells whether it grew since since_id.
      CONTINUE WHEN since_id IS NOT NULL AND NOT EXISTS (
        SELECT 1 FROM ${t.history.table} h WHERE h.key = k AND h.id > since_id);
      -- The newest entry that goes, read newest first: max_rows + 1 index entries, never the key's whole history.
      SELECT h.id INTO doomed FROM ${t.history.table} h WHERE h.key = k ORDER BY h.id DESC OFFSET max_rows LIMIT 1;
      IF doomed IS NOT NULL THEN
        DELETE FROM ${t.history.table} h WHERE h.id IN (
          SELECT o.id FROM ${t.history.table} o WHERE o.key = k AND o.id <= doomed
           ORDER BY o.id LIMIT batch - pruned
           -- Another prune's entries are skipped, never waited for.
           FOR UPDATE SKIP LOCKED);
        GET DIAGNOSTICS deleted = ROW_COUNT;
        pruned := pruned + deleted;
        -- The batch ran out on this key: it may have more, so the next call starts at it again.
        IF pruned >= batch THEN RETURN; END IF;
      END IF;
      next_key := k;
      read := read + 1;
      EXIT WHEN read >= key_count;
    END LOOP;
  END $fn$`;

/**
 * The function older pglease replicas call (a rolling upgrade, a rollback with migrations off):
 * same signature, now the age prune alone, so it stays bounded; the walk per key is this version's.
 */
const replaceLegacyFunction = (t: LeaseTable) => `
  CREATE OR REPLACE FUNCTION ${t.history.pruneFunction}(max_age_ms bigint, max_rows integer, batch integer)
  RETURNS bigint LANGUAGE sql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $fn$
    SELECT pruned FROM ${t.history.pruneAgedFunction}(max_age_ms, batch, NULL)
  $fn$`;

// to_regclass and to_regprocedure answer NULL instead of raising when the object is absent; an
// index a CREATE INDEX CONCURRENTLY left half-built exists but is not valid, and no scan uses it.
const FIND_PRUNE = `
  SELECT to_regprocedure($1) IS NOT NULL AND to_regprocedure($2) IS NOT NULL AS functions_present,
         (SELECT count(*) = 2 FROM pg_index
           WHERE indexrelid IN (to_regclass($3), to_regclass($4)) AND indisvalid) AS indexes_present`;

// Names of the pruning indexes that exist but are not valid, to build again.
const FIND_INVALID_INDEXES = `
  SELECT indexrelid::regclass::text AS name FROM pg_index
   WHERE indexrelid IN (to_regclass($1), to_regclass($2)) AND NOT indisvalid`;

const indexNames = (t: LeaseTable) => [
  `"${t.schema}"."${t.history.changedAtIndex}"`,
  `"${t.schema}"."${t.history.keyIdIndex}"`,
];

async function findPrune(
  client: Pick<pg.ClientBase, "query">,
  t: LeaseTable,
): Promise<{ functions_present: boolean; indexes_present: boolean }> {
  const { rows } = await client.query(FIND_PRUNE, [
    `${t.history.pruneAgedFunction}(bigint, integer, timestamptz)`,
    `${t.history.pruneCrowdedFunction}(integer, bigint, text, integer, integer)`,
    ...indexNames(t),
  ]);
  return rows[0] ?? { functions_present: false, indexes_present: false };
}

/** What is missing for pruning, by name; empty when complete. */
export async function missingPrune(client: Pick<pg.ClientBase, "query">, t: LeaseTable): Promise<string[]> {
  const found = await findPrune(client, t);
  return [
    found.functions_present
      ? null
      : `functions ${t.history.pruneAgedFunction}, ${t.history.pruneCrowdedFunction}`,
    found.indexes_present ? null : `indexes ${t.history.changedAtIndex}, ${t.history.keyIdIndex}`,
  ].filter((m): m is string => m !== null);
}

/**
 * Inside the migration's transaction, after the history table exists. Building the indexes on an
 * existing history makes changes of hands wait until they are built, once (docs/reference.md, `pglease migrate`).
 */
export async function migratePrune(client: Pick<pg.ClientBase, "query">, t: LeaseTable): Promise<void> {
  const found = await findPrune(client, t);
  if (!found.indexes_present) {
    const invalid = await client.query<{ name: string }>(FIND_INVALID_INDEXES, indexNames(t));
    for (const { name } of invalid.rows) await client.query(`DROP INDEX ${name}`);
    for (const sql of createIndexes(t)) await client.query(sql);
  }
  if (found.functions_present) return;
  await client.query(createAgedFunction(t));
  await client.query(createPreviousAgedFunction(t));
  await client.query(createCrowdedFunction(t));
  await client.query(replaceLegacyFunction(t));
}

// One batch of entries past the age, oldest first, from where the batch before stopped.
const pruneAgedSql = (t: LeaseTable) =>
  `SELECT pruned::int AS pruned, last_changed_at FROM ${t.history.pruneAgedFunction}($1, $2, $3)`;

/**
 * One bounded batch by age, from `from` (null: the oldest end); answers how many entries went and
 * the newest instant among them, where the next batch resumes (a Date keeps milliseconds: the next
 * batch starts at most a millisecond early, never late).
 */
export async function pruneAged(
  db: Pick<pg.Pool, "query">,
  t: LeaseTable,
  maxAgeMs: number,
  batch: number,
  from: Date | null = null,
): Promise<{ pruned: number; last: Date | null }> {
  const { rows } = await db.query<{ pruned: number; last_changed_at: Date | null }>(pruneAgedSql(t), [
    maxAgeMs,
    batch,
    from,
  ]);
  return { pruned: rows[0]?.pruned ?? 0, last: rows[0]?.last_changed_at ?? from };
}

// One page of the walk over the keys, resuming after $3.
const pruneCrowdedSql = (t: LeaseTable) =>
  `SELECT next_key, done, pruned::int AS pruned, high_id::text AS high_id
     FROM ${t.history.pruneCrowdedFunction}($1, $2, $3, $4, $5)`;

/** Where the walk over the keys stands between passes. */
export interface PruneWalk {
  /** Where the next page resumes; null to start a walk. */
  afterKey: string | null;
  /** This walk reads only keys with entries above this id (null: every key). */
  since: number | null;
  /** The newest id when the last two walks began, oldest first. */
  starts: number[];
}

export const newWalk = (): PruneWalk => ({ afterKey: null, since: null, starts: [] });

/**
 * One page of the walk. A walk reads only the keys grown since the walk before last began: an
 * entry is committed within its statement's timeout, so one the last walk could not yet see was
 * written after that; a walk begins at most once per pass, passes minutes apart.
 */
async function walkPage(
  db: Pick<pg.Pool, "query">,
  t: LeaseTable,
  walk: PruneWalk,
  page: { maxRows: number; keys: number; batch: number },
): Promise<number> {
  const starting = walk.afterKey === null;
  if (starting) walk.since = walk.starts.length === 2 ? (walk.starts[0] ?? null) : null;
  const { rows } = await db.query<{
    next_key: string | null;
    done: boolean;
    pruned: number;
    high_id: string | null;
  }>(pruneCrowdedSql(t), [page.maxRows, walk.since, walk.afterKey, page.keys, page.batch]);
  const row = rows[0];
  if (!row) throw new Error("the history walk returned no row");
  if (starting) walk.starts = [...walk.starts, Number(row.high_id ?? 0)].slice(-2);
  walk.afterKey = row.done ? null : row.next_key;
  return row.pruned;
}

export interface PruneBudget {
  /** Entries deleted per statement, at most. */
  batch: number;
  /** Statements by age, at most; a backlog is worked off over several passes. */
  maxBatches: number;
  /** Pages of the walk over the keys, at most; the walk resumes where the last pass stopped. */
  maxPages: number;
}

/** Index entries one page of the walk reads, about: each key read reads its newest maxRowsPerKey. */
const ENTRIES_PER_PAGE = 10_000;

/**
 * Prunes by age, then walks the keys from where `walk` stands, cutting each to its rows per key,
 * within the budget; leaves in `walk` where the next pass resumes. Answers how many entries went.
 */
export async function pruneHistory(
  db: Pick<pg.Pool, "query">,
  t: LeaseTable,
  retention: HistoryRetention,
  budget: PruneBudget,
  walk: PruneWalk,
): Promise<number> {
  let total = 0;
  // Each run starts at the oldest end: an entry a batch skipped (another prune held it, or it was
  // its key's newest then) is looked at again.
  let from: Date | null = null;
  for (let i = 0; i < budget.maxBatches; i++) {
    const batch = await pruneAged(db, t, retention.maxAgeMs, budget.batch, from);
    total += batch.pruned;
    from = batch.last;
    if (batch.pruned < budget.batch) break;
  }
  const page = {
    maxRows: retention.maxRowsPerKey,
    keys: Math.max(1, Math.floor(ENTRIES_PER_PAGE / retention.maxRowsPerKey)),
    batch: budget.batch,
  };
  for (let i = 0; i < budget.maxPages; i++) {
    total += await walkPage(db, t, walk, page);
    if (walk.afterKey === null) break;
  }
  return total;
}
