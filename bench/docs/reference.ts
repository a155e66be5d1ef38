// A results document as the docs read it: figures by path (bench/figures.ts), each written with
// the precision that fits it, and "not measured" where the results have none.
import { figureAt, numberAt } from "../figures.ts";
import { count } from "../report.ts";
import type { ResultsDocument } from "../results.ts";

export const NOT_MEASURED = "not measured";

/** 0.22 ms, 3.2 ms, 14 ms, 570 ms, 1.8 s, 16.4 s; −1.3 s for a difference below zero. */
export function duration(msValue: number): string {
  if (msValue < 0) return `−${duration(-msValue)}`;
  if (msValue >= 1000) return `${(msValue / 1000).toFixed(1)} s`;
  if (msValue >= 10) return `${Math.round(msValue)} ms`;
  return `${Number(msValue.toPrecision(2))} ms`;
}

/** 4.5×, 12×: one decimal below ten, none above. */
export function times(factor: number): string {
  return `${factor >= 10 ? factor.toFixed(0) : factor.toFixed(1)}×`;
}

/** "1.7–5.0×", or one figure when they round alike. */
export function timesRange(factors: number[]): string {
  if (factors.length === 0) return NOT_MEASURED;
  const low = times(Math.min(...factors));
  const high = times(Math.max(...factors));
  return low === high ? low : `${low.slice(0, -1)}–${high}`;
}

export class Reference {
  readonly document: ResultsDocument;

  constructor(document: ResultsDocument) {
    this.document = document;
  }

  value(path: string): unknown {
    return figureAt(this.document.groups, path);
  }

  number(path: string): number | undefined {
    return numberAt(this.document.groups, path);
  }

  /** A duration at `path`, or "not measured". */
  ms(path: string): string {
    const value = this.number(path);
    return value === undefined ? NOT_MEASURED : duration(value);
  }

  /** "p50 / p99" of a spread (an object with p50Ms and p99Ms) at `path`. */
  spread(path: string): string {
    const p50 = this.number(`${path}.p50Ms`);
    const p99 = this.number(`${path}.p99Ms`);
    return p50 === undefined || p99 === undefined ? NOT_MEASURED : `${duration(p50)} / ${duration(p99)}`;
  }

  /** A whole count at `path` (1,343), or "not measured". */
  count(path: string): string {
    const value = this.number(path);
    return value === undefined ? NOT_MEASURED : count(value);
  }

  /** How many times `a` is `b` (both paths), as "12×". */
  ratio(a: string, b: string): string {
    const x = this.number(a);
    const y = this.number(b);
    return x === undefined || y === undefined || y === 0 ? NOT_MEASURED : times(x / y);
  }
}
