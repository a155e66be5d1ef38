// The schedule's story, recorded only when asked (a replay): a failing seed prints what each
// process sent and heard, what the server did and when, and which fault was on.

export class Trace {
  readonly on: boolean;
  readonly lines: string[] = [];

  constructor(on: boolean) {
    this.on = on;
  }

  add(atUs: number, who: string, text: string): void {
    if (this.on) this.lines.push(`${fmtTime(atUs).padStart(10)}  ${who.padEnd(8)} ${text}`);
  }
}

/** Simulated µs as seconds with millisecond decimals: "12.345s". */
export function fmtTime(us: number): string {
  return `${(us / 1e6).toFixed(4)}s`;
}

export function fmtMs(us: number): string {
  return `${Math.round(us / 100) / 10}ms`;
}
