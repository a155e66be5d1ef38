// Marked regions of a Markdown file, `<!-- bench:NAME -->…<!-- /bench:NAME -->`, rewritten with
// what a renderer gives for NAME. A region whose content starts on a new line is a block (its
// content written between the markers on lines of its own); otherwise it is inline, within a
// sentence. Unknown names, unclosed or nested regions are errors naming the file and line.

const OPEN = /<!-- bench:([\w.-]+) -->/g;

export type Render = (name: string) => string | undefined;

function lineOf(text: string, index: number): number {
  return text.slice(0, index).split("\n").length;
}

/** The names of the regions in `text`, in order. */
export function regionNames(text: string, file: string): string[] {
  return [...regions(text, file)].map((region) => region.name);
}

interface Region {
  name: string;
  /** Where the content starts (just after the opening marker) and ends (at the closing one). */
  from: number;
  to: number;
}

function* regions(text: string, file: string): Generator<Region> {
  OPEN.lastIndex = 0;
  for (let match = OPEN.exec(text); match; match = OPEN.exec(text)) {
    const name = match[1] as string;
    const from = match.index + match[0].length;
    const close = `<!-- /bench:${name} -->`;
    const to = text.indexOf(close, from);
    if (to < 0) throw new Error(`${file}:${lineOf(text, match.index)}: ${name} is not closed by ${close}`);
    const inner = text.slice(from, to);
    const nested = /<!-- \/?bench:/.exec(inner);
    if (nested) {
      throw new Error(`${file}:${lineOf(text, from + nested.index)}: a marker inside the region ${name}`);
    }
    yield { name, from, to };
    OPEN.lastIndex = to + close.length;
  }
}

/** `text` with every region's content replaced by `render(name)`. */
export function rewriteRegions(text: string, file: string, render: Render): string {
  let out = "";
  let at = 0;
  for (const { name, from, to } of regions(text, file)) {
    const content = render(name);
    if (content === undefined) {
      throw new Error(`${file}:${lineOf(text, from)}: no generator for the region ${name} (bench/docs/)`);
    }
    const block = text[from] === "\n";
    out += text.slice(at, from) + (block ? `\n${content.trim()}\n` : content.trim());
    at = to;
  }
  return out + text.slice(at);
}
