import { CLIENT_GO_DEFAULTS, type PeerTiming, SHORT_TIMING } from "./peers/systems.ts";

// What a figure group is: a named function from a database and a budget to figures (for the
// JSON file) and tables (for the terminal). run.ts keeps the registry of groups.

/** How much work each figure may do; --quick scales these down, the smoke test shrinks them to a few. */
export interface Budget {
  /** Untimed iterations before each figure, so connections, prepared statements and caches are warm. */
  warmup: number;
  /** Timed iterations per figure (a claim/release cycle counts once). */
  iterations: number;
  /** Wall-clock cap per figure, plus a quarter of it for the warm-up; count or time, whichever ends first. */
  maxMsPerFigure: number;
  /** Lease counts for the scale group. */
  leaseCounts: number[];
  /** Timed renew ticks per lease count: renewMany ticks, and the cap for one-statement-each ticks. */
  batchedTicks: number;
  oneEachTicks: number;
  /** Elector start-ups timed per variant. */
  startups: number;
  /** The timing every election system runs with in the peers group. */
  peerTiming: PeerTiming;
  /** Handovers timed per system after a SIGKILL, and per variant after a SIGTERM. */
  crashTrials: number;
  gracefulTrials: number;
  /** Elections run side by side for a series whose trials each wait out a whole lease. */
  slowLanes: number;
  /** How long the quiet elections are watched for their steady-state cost. */
  steadyWindowMs: number;
  /** `pglease run` start-ups timed per variant (footprint). */
  cliStartups: number;
  /** Leases campaigned for by one process through openLeases, and renew intervals watched per count. */
  electorCounts: number[];
  electorRenewIntervals: number;
}

export interface BenchContext {
  /** A fresh database that the bench owns for this run. */
  databaseUrl: string;
  budget: Budget;
  /** Aborted on Ctrl-C: loops stop at the next iteration. */
  signal: AbortSignal;
  /** Progress lines for the terminal (stderr); figures go to the tables. */
  progress: (line: string) => void;
}

export interface Table {
  title: string;
  columns: string[];
  rows: string[][];
  /** Printed under the table: how to read it. */
  notes: string[];
}

export interface GroupResult<Figures = unknown> {
  group: string;
  figures: Figures;
  tables: Table[];
}

export interface FigureGroup {
  name: string;
  description: string;
  run(context: BenchContext): Promise<GroupResult>;
}

export const FULL_BUDGET: Budget = {
  warmup: 300,
  iterations: 4_000,
  maxMsPerFigure: 15_000,
  leaseCounts: [1, 100, 1_000, 10_000],
  batchedTicks: 50,
  oneEachTicks: 10,
  startups: 50,
  peerTiming: CLIENT_GO_DEFAULTS,
  crashTrials: 24,
  gracefulTrials: 24,
  slowLanes: 3,
  steadyWindowMs: 360_000,
  cliStartups: 10,
  electorCounts: [1, 100, 1_000, 10_000],
  electorRenewIntervals: 4,
};

export const QUICK_BUDGET: Budget = {
  warmup: 30,
  iterations: 300,
  maxMsPerFigure: 1_500,
  leaseCounts: [1, 100, 1_000, 10_000],
  batchedTicks: 10,
  oneEachTicks: 1,
  startups: 10,
  peerTiming: SHORT_TIMING,
  crashTrials: 3,
  gracefulTrials: 3,
  slowLanes: 1,
  steadyWindowMs: 20_000,
  cliStartups: 3,
  electorCounts: [1, 1_000],
  electorRenewIntervals: 1,
};
