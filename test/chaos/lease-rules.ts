// The checker's rules on the lease itself: what the lease table's change log (commit order) and
// the replicas' acquisitions say about fences and terms, over the whole recording.
import type { History, LeaseRow } from "./history.ts";
import type { Violation } from "./violation.ts";

/** Holder identity → replica: from the processes' own log lines, else from `<pod>-<8 hex>`. */
export function replicaOfHolder(history: History): (holder: string) => string | null {
  const known = new Map(history.incarnations.flatMap((i) => (i.holder ? [[i.holder, i.replica]] : [])));
  const byPod = new Map(Object.entries(history.pods).map(([replica, pod]) => [pod, replica]));
  return (holder) =>
    known.get(holder) ??
    byPod.get(/^(.*)-[0-9a-f]{8}(?:#r:[0-9a-f]{32}\.[0-9]+)?$/.exec(holder)?.[1] ?? "") ??
    null;
}

/**
 * Row b continues a's term: the same holder since the same start. A release is the one statement
 * that may move the start: after a backward step of the server's clock it writes
 * acquired_at = now − 1 µs (END_TERM in src/postgres/statement-parts.ts) so the CHECK holds; that
 * row keeps the term's fence.
 */
const sameTerm = (a: LeaseRow, b: LeaseRow) =>
  a.holder === b.holder &&
  (a.acquiredAt === b.acquiredAt ||
    (b.fence === a.fence &&
      b.acquiredAt < a.acquiredAt &&
      b.expiresAt <= b.loggedAt &&
      Math.round((b.expiresAt - b.acquiredAt) * 1000) === 1));

/** Fences strictly increase across terms, in the lease table and in what the replicas log. */
export function fenceViolations(history: History): Violation[] {
  const out: Violation[] = [];
  const previous = new Map<string, LeaseRow>();
  for (const row of [...history.leaseRows].sort((a, b) => a.seq - b.seq)) {
    const before = previous.get(row.key);
    previous.set(row.key, row);
    if (!before) continue;
    const same = sameTerm(before, row);
    if (same ? row.fence !== before.fence : row.fence <= before.fence) {
      out.push({
        rule: "fence-order",
        at: row.acquiredAt,
        detail: `lease ${row.key}: row ${row.seq} gives ${row.holder} fence ${row.fence} after ${before.holder}'s ${before.fence}${same ? " in the same term" : ""}`,
      });
    }
  }
  const holderOf = new Map(history.incarnations.map((i) => [i.pid, i.holder]));
  const granted = new Set(history.leaseRows.map((r) => `${r.holder} ${r.fence}`));
  const acquisitions = history.transitions
    .filter((t) => t.outcome === "acquired")
    .map((t) => ({ ...t, holder: holderOf.get(t.pid) ?? `pid ${t.pid}` }))
    .sort((a, b) => a.time - b.time || (a.fence ?? 0) - (b.fence ?? 0));
  let last: (typeof acquisitions)[number] | null = null;
  for (const a of acquisitions) {
    if (!granted.has(`${a.holder} ${a.fence}`)) {
      out.push({
        rule: "fence-not-granted",
        at: a.time,
        detail: `${a.holder} logged fence ${a.fence}, which the lease table never gave it`,
      });
    }
    // The same holder may take its own live term back with the same fence; anyone else needs a higher one.
    const ok =
      last === null ||
      (a.holder === last.holder ? (a.fence ?? 0) >= (last.fence ?? 0) : (a.fence ?? 0) > (last.fence ?? 0));
    if (!ok && last) {
      out.push({
        rule: "fence-order",
        at: a.time,
        detail: `${a.holder} acquired fence ${a.fence} after ${last.holder} acquired fence ${last.fence}`,
      });
    }
    last = a;
  }
  return out;
}

const restartProof = (holder: string) => /#r:([0-9a-f]{32})\.[0-9]+$/.exec(holder)?.[1] ?? null;

/**
 * A restart takeover the kernel vouches for: both holders carry one restart lock, and the process
 * of the term taken over had died before the taker started (the lock binds only then). Judged on
 * this machine's clock, which a server clock step does not move.
 */
function provenDeadTakeover(history: History, old: string, taker: string): boolean {
  const proof = restartProof(old);
  if (proof === null || restartProof(taker) !== proof) return false;
  const oldProcess = history.incarnations.find((i) => i.holder === old);
  const newProcess = history.incarnations.find((i) => i.holder === taker);
  return (
    oldProcess?.endedAt != null && newProcess !== undefined && newProcess.startedAt >= oldProcess.endedAt
  );
}

/**
 * Crash takeover: the old holder's process had ended (the harness killed it, and recorded so
 * before the signal) when the new term began. The kubelet's report can only follow that end; a
 * takeover of a holder still running is not excused.
 */
function endedHolderTakeover(history: History, old: string, acquiredAt: number): boolean {
  const oldProcess = history.incarnations.find((i) => i.holder === old);
  return oldProcess?.endedAt != null && acquiredAt >= oldProcess.endedAt;
}

/**
 * No holder's term starts on the server before the previous holder's term has run out, unless
 * its process was proven dead (a restart takeover), its recorded session was gone (a session
 * takeover), or, under --crash-takeover, its process had ended (a crash takeover). A term runs until the latest expiry any of its
 * rows promised (a renew committed late with an older clock does not take back what an earlier
 * one promised), or, once released, until the release: a release is the only statement that
 * writes an expiry already past when it runs.
 */
export function termOverlaps(history: History, crashTakeover = false): Violation[] {
  const out: Violation[] = [];
  const terms = new Map<string, { row: LeaseRow; until: number; released: boolean }>();
  for (const row of [...history.leaseRows].sort((a, b) => a.seq - b.seq)) {
    const term = terms.get(row.key);
    const released = row.expiresAt <= row.loggedAt;
    if (term && sameTerm(term.row, row)) {
      term.until = released ? row.expiresAt : Math.max(term.until, row.expiresAt);
      term.released = released;
      term.row = row;
      continue;
    }
    const overlaps = term && term.row.holder !== row.holder && row.acquiredAt < term.until;
    // Session takeover: the server itself saw, in the claim's transaction, that the term it
    // replaced had recorded its holder's session and that the session was gone, which ends
    // that term's renewals; the claim is then a new term (fence-order wants its fence higher).
    const excused =
      row.tookGoneSession === true ||
      provenDeadTakeover(history, term?.row.holder ?? "", row.holder) ||
      (crashTakeover && endedHolderTakeover(history, term?.row.holder ?? "", row.acquiredAt));
    if (term && overlaps && !excused) {
      out.push({
        rule: "term-overlap",
        at: row.acquiredAt,
        detail: `lease ${row.key}: ${row.holder} started a term with fence ${row.fence} (row ${row.seq}) ${(term.until - row.acquiredAt).toFixed(3)} ms before ${term.row.holder}'s term with fence ${term.row.fence} ran out${term.released ? " at its release" : ""}`,
      });
    }
    terms.set(row.key, { row, until: row.expiresAt, released });
  }
  return out;
}

/**
 * The batched statements the change log shows: one renewMany or releaseMany writes every row it
 * touches with one statement clock, so rows of one holder's different keys with the same expiry
 * (to the microsecond) came from one statement. A release writes an expiry already past.
 */
export function batchedStatements(history: History): { renewMany: number; releaseMany: number } {
  const groups = new Map<string, Set<string>>();
  const previous = new Map<string, LeaseRow>();
  for (const row of [...history.leaseRows].sort((a, b) => a.seq - b.seq)) {
    const before = previous.get(row.key);
    previous.set(row.key, row);
    // Claims go one by one, and a removal the fault logged is no statement.
    if (!before || !sameTerm(before, row) || row.acquiredAt === row.expiresAt) continue;
    const id = `${row.holder} ${row.expiresAt} ${row.expiresAt <= row.loggedAt ? "release" : "renew"}`;
    groups.set(id, (groups.get(id) ?? new Set()).add(row.key));
  }
  const out = { renewMany: 0, releaseMany: 0 };
  for (const [id, keys] of groups) {
    if (keys.size < 2) continue;
    if (id.endsWith("release")) out.releaseMany++;
    else out.renewMany++;
  }
  return out;
}
