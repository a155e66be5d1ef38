// Terminal and Markdown tables with aligned columns, figures with fitting precision, ratios as words.
import type { Table } from "./group.ts";

export interface Ratio {
  subject: string;
  reference: string;
  /** How many times faster the subject is than the reference (below 1: slower). */
  factor: number;
  text: string;
}

/** "1.4× faster" / "2.0× slower"; one decimal below 10×, whole numbers above. */
export function ratioText(factor: number): string {
  if (!Number.isFinite(factor) || factor <= 0) return "n/a";
  const [value, word] = factor >= 1 ? [factor, "faster"] : [1 / factor, "slower"];
  return `${value >= 10 ? value.toFixed(0) : value.toFixed(1)}× ${word}`;
}

/** Compares two rates (ops/s) or two inverted costs: the bigger the faster. */
export function ratio(subject: string, reference: string, subjectRate: number, referenceRate: number): Ratio {
  const factor = subjectRate / referenceRate;
  return { subject, reference, factor, text: ratioText(factor) };
}

/** Milliseconds with precision that fits their size: 0.184, 12.4, 1534, -89.4 (a difference). */
export function ms(value: number): string {
  if (!Number.isFinite(value)) return "n/a";
  if (Math.abs(value) < 10) return value.toFixed(3);
  if (Math.abs(value) < 100) return value.toFixed(1);
  return value.toFixed(0);
}

export function count(value: number): string {
  return Number.isFinite(value) ? Math.round(value).toLocaleString("en-US") : "n/a";
}

export function mb(value: number): string {
  return value.toFixed(1);
}

const NUMERIC = /^[-\d.,]+$|^n\/a$|^—$/;

/** Columns padded to their widest cell; numbers right-aligned, words left-aligned. */
export function renderTable(table: Table): string {
  const widths = table.columns.map((column, index) =>
    Math.max(column.length, ...table.rows.map((row) => (row[index] ?? "").length)),
  );
  const numeric = table.columns.map((_, index) => table.rows.every((row) => NUMERIC.test(row[index] ?? "")));
  const line = (cells: string[]) =>
    cells
      .map((cell, index) => {
        const width = widths[index] ?? 0;
        return numeric[index] ? cell.padStart(width) : cell.padEnd(width);
      })
      .join("  ")
      .trimEnd();
  const rule = widths.map((width) => "-".repeat(width)).join("  ");
  const notes = table.notes.map((note) => `  ${note}`);
  return [table.title, "", line(table.columns), rule, ...table.rows.map(line), "", ...notes].join("\n");
}

/** The same table as Markdown, for docs/performance.md. */
export function markdownTable(table: Table): string {
  const row = (cells: string[]) => `| ${cells.join(" | ")} |`;
  const numeric = table.columns.map((_, index) =>
    table.rows.every((cells) => NUMERIC.test(cells[index] ?? "")),
  );
  const rule = `|${numeric.map((right) => (right ? "---:" : "---")).join("|")}|`;
  return [`**${table.title}**`, "", row(table.columns), rule, ...table.rows.map(row)].join("\n");
}
