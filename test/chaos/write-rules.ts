// The checker's rules on the workloads' accepted writes (chaos_writes, in commit order): none
// stale, each with a fence its own replica was granted, and enough of them that the other two
// rules are tested at all: a leader whose database link is healthy keeps writing.
import type { History } from "./history.ts";
import { replicaOfHolder } from "./lease-rules.ts";
import type { Belief } from "./timeline.ts";
import { type Interval, subtract } from "./timeline.ts";
import type { Violation } from "./violation.ts";

/**
 * In commit order, no write with a fence lower than one already accepted, nor with the same fence
 * as another replica's accepted write: a fence belongs to one term of one replica.
 */
export function staleWrites(history: History): Violation[] {
  // One violation per replica, stale fence and the write it came after, with the count and span.
  const groups = new Map<string, { first: number; last: number; count: number; sentence: string }>();
  let highest = { fence: 0, replica: "" };
  for (const w of [...history.writes].sort((a, b) => a.seq - b.seq)) {
    if (w.fence > highest.fence || (w.fence === highest.fence && w.replica === highest.replica)) {
      highest = { fence: w.fence, replica: w.replica };
      continue;
    }
    const after =
      w.fence === highest.fence
        ? `${highest.replica}'s writes with the same fence`
        : `fence ${highest.fence}`;
    const key = `${w.replica} ${w.fence} ${highest.fence} ${highest.replica}`;
    const group = groups.get(key);
    if (group) {
      group.count++;
      group.last = w.issuedAt;
    } else {
      const sentence = `by ${w.replica} with fence ${w.fence} accepted after ${after}`;
      groups.set(key, { first: w.issuedAt, last: w.issuedAt, count: 1, sentence });
    }
  }
  return [...groups.values()].map((g) => ({
    rule: "stale-write",
    at: g.first,
    detail: `${g.count} write(s) ${g.sentence}, issued over ${g.last - g.first} ms`,
  }));
}

/** Every accepted write carries a fence the lease table gave to a holder of the writing replica. */
export function writesNotGranted(history: History): Violation[] {
  const replicaOf = replicaOfHolder(history);
  const owners = new Map<number, Set<string>>();
  for (const row of history.leaseRows) {
    const set = owners.get(row.fence) ?? new Set<string>();
    set.add(replicaOf(row.holder) ?? `unknown holder ${row.holder}`);
    owners.set(row.fence, set);
  }
  const groups = new Map<string, { at: number; count: number }>();
  for (const w of history.writes) {
    if (owners.get(w.fence)?.has(w.replica)) continue;
    const key = `${w.replica} ${w.fence}`;
    const group = groups.get(key);
    if (group) group.count++;
    else groups.set(key, { at: w.issuedAt, count: 1 });
  }
  return [...groups].map(([key, g]) => {
    const [replica, fence] = key.split(" ");
    const to = [...(owners.get(Number(fence)) ?? [])];
    return {
      rule: "write-not-granted",
      at: g.at,
      detail: `${g.count} write(s) by ${replica} with fence ${fence}, which the lease table ${to.length ? `gave to ${to.join(", ")}` : "never gave out"}`,
    };
  });
}

/** Index of the first element of the sorted list that is at least `t`. */
function firstAtOrAfter(sorted: readonly number[], t: number): number {
  let low = 0;
  let high = sorted.length;
  while (low < high) {
    const mid = (low + high) >>> 1;
    if ((sorted[mid] as number) < t) low = mid + 1;
    else high = mid;
  }
  return low;
}

const DATABASE_FAULTS = new Set(["db-cut", "db-delay", "db-blackhole"]);
/** Faults that hold every replica's writes back: the server down, or its commits waiting. */
const SHARED_DATABASE_FAULTS = new Set(["pg-restart", "commit-stall", "pg-failover", "pg-failover-lagging"]);

/** When the replica's database link was under a fault: its own link's faults, restarts, failovers and stalls. */
function linkFaults(history: History, replica: string): Interval[] {
  return history.slots
    .flatMap((s) => s.faults)
    .filter(
      (f) =>
        SHARED_DATABASE_FAULTS.has(f.kind) ||
        (DATABASE_FAULTS.has(f.kind) && f.target?.split(" ")[0] === replica),
    )
    .map((f) => ({ from: f.startedAt, to: f.healedAt }));
}

/**
 * Within the fault phase, while a sidecar runs and believes it leads (so its /status says leader)
 * and its replica's database link is free of faults, the replica's workload gets a write accepted
 * at least every `boundMs`. Also returns the longest such gap, so the margin stays visible.
 */
export function quietWorkloads(
  history: History,
  list: readonly Belief[],
  boundMs: number,
): { violations: Violation[]; longestGapMs: number } {
  const violations: Violation[] = [];
  let longestGapMs = 0;
  const issued = new Map<string, number[]>();
  for (const w of history.writes) {
    const times = issued.get(w.replica) ?? [];
    times.push(w.issuedAt);
    issued.set(w.replica, times);
  }
  for (const times of issued.values()) times.sort((a, b) => a - b);
  for (const belief of list) {
    const { replica } = belief.incarnation;
    const holes = [
      ...linkFaults(history, replica),
      { from: Number.NEGATIVE_INFINITY, to: history.window.from },
      { from: history.window.to, to: Number.POSITIVE_INFINITY },
    ];
    for (const span of subtract(belief.running, holes)) {
      let previous = span.from;
      let gap = { from: span.from, ms: 0 };
      const all = issued.get(replica) ?? [];
      const times: number[] = [];
      for (let i = firstAtOrAfter(all, span.from); i < all.length && (all[i] as number) <= span.to; i++) {
        times.push(all[i] as number);
      }
      for (const t of [...times, span.to]) {
        if (t - previous > gap.ms) gap = { from: previous, ms: t - previous };
        previous = t;
      }
      longestGapMs = Math.max(longestGapMs, gap.ms);
      if (gap.ms > boundMs) {
        violations.push({
          rule: "quiet-workload",
          at: gap.from,
          detail: `${replica} led with a healthy database link for ${span.to - span.from} ms but got no write accepted for ${gap.ms} ms (bound ${boundMs} ms)`,
        });
      }
    }
  }
  return { violations, longestGapMs };
}
