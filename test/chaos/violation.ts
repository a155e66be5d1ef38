// What the chaos checker reports: one named rule broken at one instant, in a sentence.

export type Rule =
  | "stale-write"
  | "write-not-granted"
  | "quiet-workload"
  | "fence-order"
  | "fence-not-granted"
  | "term-overlap"
  | "two-believers"
  | "two-labelled"
  | "two-labelled-across-clusters"
  | "liveness"
  | "unready-leader";

export interface Violation {
  rule: Rule;
  at: number;
  detail: string;
}
