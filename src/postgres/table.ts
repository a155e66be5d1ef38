// Where the lease rows live. Schema and table names come from configuration, so they are
// validated against a conservative identifier syntax and always quoted when spliced into SQL;
// keys and holders never are: they travel as parameters.
import { createHash } from "node:crypto";
import { identifierProblem } from "../shared/sql-identifier.ts";

export interface LeaseTable {
  schema: string;
  table: string;
  /** `"schema"."table"`, safe to splice into SQL text. */
  qualified: string;
  /** Short stable tag for prepared-statement names, distinct per table. */
  tag: string;
  /** The LISTEN/NOTIFY channel announcing releases on this table. */
  channel: string;
  /** The channel asking a leader to hand over (pglease handover); the payload is the key. */
  handoverChannel: string;
  /** Every campaigning process per key, `"schema"."<table>_candidates"` (pglease candidates). */
  candidates: string;
  /** The fence counter, `"schema"."<table>_fence"`: a sequence the table does not own, so fences survive it. */
  fenceSequence: string;
  /** Every change of hands, `"schema"."<table>_history"`, written by a trigger on the lease table. */
  history: {
    table: string;
    name: string;
    recordFunction: string;
    /** The statement-level trigger's: the terms a set-based statement ended, in one INSERT. */
    recordEndedFunction: string;
    /** Kept for older pglease replicas only; prunes by age (see history-prune.ts). */
    pruneFunction: string;
    pruneAgedFunction: string;
    pruneCrowdedFunction: string;
    /** Unqualified index names (an index lives in its table's schema). */
    keyIdIndex: string;
    changedAtIndex: string;
  };
}

export function leaseTable(schema = "public", table = "pglease_leases"): LeaseTable {
  const problems = [identifierProblem("schema", schema), identifierProblem("table", table)].filter(
    (p): p is string => p !== null,
  );
  if (problems.length > 0) throw new TypeError(problems.join("; "));
  const tag = createHash("sha256").update(`${schema}.${table}`).digest("hex").slice(0, 10);
  // PostgreSQL truncates names past 63 bytes, so a long table name keeps the tag to stay distinct.
  const derived = (suffix: string) =>
    table.length + suffix.length + 1 <= 63
      ? `${table}_${suffix}`
      : `${table.slice(0, 51 - suffix.length)}_${suffix}_${tag}`;
  const sequence = derived("fence");
  const history = derived("history");
  return {
    schema,
    table,
    qualified: `"${schema}"."${table}"`,
    tag,
    channel: `pglease_release_${tag}`,
    handoverChannel: `pglease_handover_${tag}`,
    candidates: `"${schema}"."${derived("candidates")}"`,
    fenceSequence: `"${schema}"."${sequence}"`,
    history: {
      table: `"${schema}"."${history}"`,
      name: history,
      recordFunction: `"${schema}"."${derived("record_change")}"`,
      recordEndedFunction: `"${schema}"."${derived("record_ended")}"`,
      pruneFunction: `"${schema}"."${derived("prune_history")}"`,
      pruneAgedFunction: `"${schema}"."${derived("prune_aged")}"`,
      pruneCrowdedFunction: `"${schema}"."${derived("prune_crowded")}"`,
      keyIdIndex: derived("history_key_id"),
      changedAtIndex: derived("history_changed_at"),
    },
  };
}
