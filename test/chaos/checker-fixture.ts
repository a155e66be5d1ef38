// A small, consistent chaos history for the checker's tests: every rule holds on it, and each
// test breaks exactly one thing.
import type { AcceptedWrite, History, Incarnation, LabelChange, LeaseRow, Transition } from "./history.ts";

export const LEASE = "chaos";
/** Where the fault phase ends; shutdown runs until END. */
export const WINDOW_TO = 12_000;
export const END = 12_500;

let seq = 0;
/** The replica's workload writing with `fence` every 100 ms from `from` to `to`, both included. */
export function writesEvery(replica: string, fence: number, from: number, to: number): AcceptedWrite[] {
  const out: AcceptedWrite[] = [];
  for (let t = from; t <= to; t += 100) out.push({ seq: ++seq, replica, fence, issuedAt: t });
  return out;
}

/** One accepted write, committed after every write made so far. */
export const write = (replica: string, fence: number, issuedAt: number): AcceptedWrite => ({
  seq: ++seq,
  replica,
  fence,
  issuedAt,
});

export function row(
  holder: string,
  fence: number,
  acquiredAt: number,
  expiresAt: number,
  loggedAt: number,
): LeaseRow {
  return { seq: ++seq, key: LEASE, holder, fence, acquiredAt, expiresAt, loggedAt };
}

/** The rows renumbered in array order: their commit order after a test spliced one in. */
export const inCommitOrder = (rows: LeaseRow[]): LeaseRow[] => rows.map((r, i) => ({ ...r, seq: i + 1 }));

let rv = 100;
export const label = (time: number, pod: string, role: string | null): LabelChange => ({
  resourceVersion: rv++,
  time,
  pod,
  role,
});

/**
 * Two replicas. a (pid 1, holder a-1) leads with fence 1 from 1000; its database link is cut
 * from 3000 to 6500 and it steps down at 5000. b (pid 2, holder b-1) takes over with fence 2 at
 * 7000 and releases at shutdown (12 200). Each workload writes every 100 ms while its link is up.
 */
export function cleanHistory(): History {
  const incarnations: Incarnation[] = [
    { replica: "a", pid: 1, holder: "a-1", startedAt: 0, endedAt: 12_400 },
    { replica: "b", pid: 2, holder: "b-1", startedAt: 0, endedAt: 12_450 },
  ];
  const transitions: Transition[] = [
    { pid: 1, time: 1_000, outcome: "acquired", fence: 1 },
    { pid: 2, time: 1_010, outcome: "held-by-other", fence: 1 },
    { pid: 1, time: 5_000, outcome: "stepped-down", fence: 1 },
    { pid: 2, time: 7_000, outcome: "acquired", fence: 2 },
    { pid: 2, time: 12_200, outcome: "released", fence: 2 },
  ];
  return {
    lease: LEASE,
    leaseMs: 2_000,
    window: { from: 0, to: WINDOW_TO },
    end: END,
    pods: { a: "pod-a", b: "pod-b" },
    incarnations,
    transitions,
    pauses: [],
    leaseRows: [
      row("a-1", 1, 1_000, 3_000, 1_000),
      row("a-1", 1, 1_000, 4_300, 2_300),
      row("b-1", 2, 7_000, 9_000, 7_000),
      row("b-1", 2, 7_000, 13_500, 11_500),
      // The release: an expiry no later than the instant it was written.
      row("b-1", 2, 7_000, 12_190, 12_190),
    ],
    writes: [...writesEvery("a", 1, 1_100, 2_900), ...writesEvery("b", 2, 7_100, 12_100)],
    rejections: [{ replica: "a", fence: 1, currentFence: 2, time: 7_200 }],
    labels: [
      label(500, "pod-a", "follower"),
      label(500, "pod-b", "follower"),
      label(1_020, "pod-a", "leader"),
      label(5_010, "pod-a", "follower"),
      label(7_020, "pod-b", "leader"),
      label(12_150, "pod-b", "follower"),
    ],
    appReadiness: [],
    slots: [
      {
        index: 0,
        kind: "db-cut",
        startedAt: 3_000,
        healedAt: 6_500,
        faults: [{ kind: "db-cut", target: "a (leader)", startedAt: 3_000, healedAt: 6_500, detail: "cut" }],
      },
    ],
  };
}
