// The failover distributions of the peers group as an SVG strip chart on a logarithmic time
// axis: one row per system and stop signal, every trial a dot, a box from the 25th to the 75th
// percentile with the median, whiskers to the extremes. Plain SVG, no dependency.
import type { FailoverSeries, PeerFigures } from "./groups/peers.ts";
import type { PeerKind } from "./peers/candidates.ts";
import { SYSTEMS } from "./peers/systems.ts";

const WIDTH = 920;
const LABEL_WIDTH = 300;
const PLOT_LEFT = LABEL_WIDTH + 10;
const PLOT_RIGHT = WIDTH - 30;
const ROW_HEIGHT = 36;
const SECTION_HEIGHT = 30;
const TOP = 72;
const AXIS_HEIGHT = 50;
const COLOURS: Record<PeerKind, string> = {
  pglease: "#1f6fb4",
  "client-go": "#e07b10",
  "advisory-lock": "#2a9d3a",
};

function escapeXml(text: string): string {
  return text.replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;");
}

function quantile(sorted: number[], q: number): number {
  const position = (sorted.length - 1) * q;
  const low = Math.floor(position);
  const high = Math.ceil(position);
  const a = sorted[low] ?? 0;
  const b = sorted[high] ?? a;
  return a + (b - a) * (position - low);
}

function timeLabel(msValue: number): string {
  return msValue >= 1000 ? `${msValue / 1000} s` : `${msValue} ms`;
}

/** Deterministic vertical spread of the dots, so the chart is the same for the same results. */
function jitter(index: number): number {
  return (((index * 2654435761) % 1000) / 1000 - 0.5) * (ROW_HEIGHT * 0.5);
}

function row(series: FailoverSeries, y: number, x: (msValue: number) => number): string[] {
  const values = series.trials.map((t) => t.holdsMs).filter((v) => v > 0);
  const sorted = [...values].sort((a, b) => a - b);
  const colour = COLOURS[SYSTEMS[series.system].kind];
  const mid = y + ROW_HEIGHT / 2;
  const parts = [
    `<text x="${LABEL_WIDTH}" y="${mid + 4}" text-anchor="end">${escapeXml(series.label)} (n=${values.length})</text>`,
  ];
  if (sorted.length === 0) return parts;
  const [p25, p50, p75] = [0.25, 0.5, 0.75].map((q) => quantile(sorted, q)) as [number, number, number];
  const min = sorted[0] ?? p50;
  const max = sorted.at(-1) ?? p50;
  parts.push(
    `<line x1="${x(min)}" x2="${x(max)}" y1="${mid}" y2="${mid}" stroke="${colour}" stroke-width="1"/>`,
    `<rect x="${x(p25)}" y="${mid - 9}" width="${Math.max(1, x(p75) - x(p25))}" height="18" fill="${colour}" fill-opacity="0.15" stroke="${colour}"/>`,
    `<line x1="${x(p50)}" x2="${x(p50)}" y1="${mid - 11}" y2="${mid + 11}" stroke="${colour}" stroke-width="3"/>`,
    ...values.map(
      (v, i) =>
        `<circle cx="${x(v).toFixed(1)}" cy="${(mid + jitter(i)).toFixed(1)}" r="2.6" fill="${colour}" fill-opacity="0.65"/>`,
    ),
  );
  return parts;
}

export function failoverSvg(figures: PeerFigures): string {
  const all = figures.series.flatMap((s) => s.trials.map((t) => t.holdsMs)).filter((v) => v > 0);
  const low = 10 ** Math.floor(Math.log10(Math.min(...all, 10)));
  const high = 10 ** Math.ceil(Math.log10(Math.max(...all, 100)));
  const x = (msValue: number) =>
    PLOT_LEFT +
    ((Math.log10(Math.max(msValue, low)) - Math.log10(low)) / (Math.log10(high) - Math.log10(low))) *
      (PLOT_RIGHT - PLOT_LEFT);
  const parts: string[] = [];
  let y = TOP;
  for (const [event, title] of [
    ["crash", "Leader killed (SIGKILL) → new leader holds"],
    ["graceful", "Leader stopped (SIGTERM) → new leader holds"],
  ] as const) {
    parts.push(`<text x="10" y="${y + 20}" font-weight="bold">${title}</text>`);
    y += SECTION_HEIGHT;
    for (const series of figures.series.filter((s) => s.event === event)) {
      parts.push(...row(series, y, x));
      y += ROW_HEIGHT;
    }
  }
  const plotBottom = y + 6;
  const ticks: string[] = [];
  // Over many decades the 2 and 5 labels would run into each other: their lines stay.
  const labelMinor = Math.log10(high / low) <= 3;
  for (let decade = low; decade <= high; decade *= 10) {
    for (const step of [1, 2, 5]) {
      const value = decade * step;
      if (value > high) break;
      const tx = x(value).toFixed(1);
      const major = step === 1;
      ticks.push(
        `<line x1="${tx}" x2="${tx}" y1="${TOP}" y2="${plotBottom}" stroke="#000" stroke-opacity="${major ? 0.18 : 0.07}"/>`,
      );
      if (major || labelMinor) {
        ticks.push(
          `<text x="${tx}" y="${plotBottom + 16}" text-anchor="middle" fill-opacity="${major ? 1 : 0.6}">${timeLabel(value)}</text>`,
        );
      }
    }
  }
  const height = plotBottom + AXIS_HEIGHT;
  return [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${WIDTH}" height="${height}" viewBox="0 0 ${WIDTH} ${height}" font-family="sans-serif" font-size="12">`,
    `<title>Failover time per system, ${escapeXml(figures.timing.name)}</title>`,
    `<rect width="${WIDTH}" height="${height}" fill="#fff"/>`,
    `<text x="10" y="22" font-size="15" font-weight="bold">Failover time per system (log scale), ${escapeXml(figures.timing.name)}</text>`,
    `<text x="10" y="40" fill-opacity="0.7">Dots: trials. Box: 25th–75th percentile, thick line: median, whiskers: min–max.</text>`,
    `<text x="10" y="56" fill-opacity="0.7">pglease and the advisory lock timed on PostgreSQL's clock, client-go on the host's (its own, on the bench's host).</text>`,
    ...ticks,
    ...parts,
    `<text x="${(PLOT_LEFT + PLOT_RIGHT) / 2}" y="${plotBottom + 38}" text-anchor="middle">time from the stop signal to the new leader holding the lease</text>`,
    "</svg>",
    "",
  ].join("\n");
}
