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
};

export const QUICK_BUDGET: Budget = {
  warmup: 30,
  iterations: 300,
  maxMsPerFigure: 1_500,
  leaseCounts: [1, 100, 1_000, 10_000],
  batchedTicks: 10,
  oneEachTicks: 1,
  startups: 10,
};
