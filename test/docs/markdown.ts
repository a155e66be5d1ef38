// Reading the project's Markdown as GitHub renders it: which pages are the docs, the anchors their
// headings get, the links they hold, and their code blocks.
import { existsSync } from "node:fs";
import { readdir, readFile } from "node:fs/promises";
import { join } from "node:path";

export const repoRoot = join(import.meta.dirname, "..", "..");

/** The pages the docs tests hold: the README, docs/, and each chart's README. */
export async function docPages(): Promise<string[]> {
  const docs = (await readdir(join(repoRoot, "docs")))
    .filter((f) => f.endsWith(".md"))
    .map((f) => `docs/${f}`);
  const charts = (await readdir(join(repoRoot, "charts"))).map((c) => `charts/${c}/README.md`);
  return ["README.md", ...docs.sort(), ...charts.sort()];
}

/** Every page whose links the docs test keeps live: the docs, plus the examples', the simulation's and the changelog. */
export async function linkedPages(): Promise<string[]> {
  const examples = (await readdir(join(repoRoot, "deploy", "examples"), { withFileTypes: true }))
    .filter((e) => e.isDirectory() && existsSync(join(e.parentPath, e.name, "README.md")))
    .map((e) => `deploy/examples/${e.name}/README.md`);
  return [
    ...(await docPages()),
    ...examples.sort(),
    "test/sim/README.md",
    "test/sim/known-holes.md",
    "CHANGELOG.md",
  ];
}

export async function readPage(path: string): Promise<string> {
  return readFile(join(repoRoot, path), "utf8");
}

/** Each line, with whether it sits inside a fenced code block (the fence lines count as inside). */
function linesOutsideFences(markdown: string): Array<{ text: string; line: number }> {
  const out: Array<{ text: string; line: number }> = [];
  let fence: string | null = null;
  markdown.split("\n").forEach((text, i) => {
    const opener = /^\s*(`{3,}|~{3,})/.exec(text)?.[1];
    if (fence === null && opener) fence = opener;
    else if (fence !== null && text.trim().startsWith(fence)) fence = null;
    else if (fence === null) out.push({ text, line: i + 1 });
  });
  return out;
}

/**
 * GitHub's anchor for a heading: lower case, inline markup and punctuation dropped (letters,
 * digits, `-` and `_` stay, of any script), each space a `-`.
 */
export function githubSlug(heading: string): string {
  return heading
    .replace(/<[^>]*>/g, "")
    .replace(/!?\[([^\]]*)\]\([^)]*\)/g, "$1")
    .trim()
    .toLowerCase()
    .replace(/[^\p{L}\p{N}\p{M}\- _]/gu, "")
    .replace(/ /g, "-");
}

/** Every anchor a page offers: its headings' slugs (a repeated one gets -1, -2, …) and HTML ids. */
export function anchorsOf(markdown: string): Set<string> {
  const anchors = new Set<string>();
  const seen = new Map<string, number>();
  for (const { text } of linesOutsideFences(markdown)) {
    const heading = /^#{1,6}\s+(.*?)\s*#*\s*$/.exec(text)?.[1];
    if (heading !== undefined) {
      const slug = githubSlug(heading);
      const n = seen.get(slug) ?? 0;
      seen.set(slug, n + 1);
      anchors.add(n === 0 ? slug : `${slug}-${n}`);
    }
    for (const id of text.matchAll(/<a\s+(?:name|id)="([^"]+)"/g)) anchors.add(id[1] as string);
  }
  return anchors;
}

export interface Link {
  target: string;
  line: number;
}

/** Inline links and images outside code (fenced blocks and `code spans`). */
export function linksOf(markdown: string): Link[] {
  const links: Link[] = [];
  for (const { text, line } of linesOutsideFences(markdown)) {
    const prose = text.replace(/`[^`]*`/g, "");
    for (const match of prose.matchAll(/\]\(([^)\s]+)(?:\s+"[^"]*")?\)/g)) {
      links.push({ target: match[1] as string, line });
    }
  }
  return links;
}

export interface CodeBlock {
  lang: string;
  code: string;
  /** The line of the opening fence. */
  line: number;
  /**
   * What the page says the example leaves to the reader, from an HTML comment on the line before
   * the block, `<!-- example-context: declare function warmCache(): Promise<void>; -->`: prepended
   * when the example is compiled, never shown.
   */
  context: string;
}

export function codeBlocks(markdown: string): CodeBlock[] {
  const blocks: CodeBlock[] = [];
  const lines = markdown.split("\n");
  for (let i = 0; i < lines.length; i++) {
    const open = /^(`{3,})(\w*)\s*$/.exec(lines[i] as string);
    if (!open) continue;
    const end = lines.findIndex((l, j) => j > i && l.startsWith(open[1] as string));
    if (end < 0) throw new Error(`line ${i + 1}: a code block that is not closed`);
    const context = /^<!-- example-context: ([\s\S]*) -->$/.exec(lines[i - 1] ?? "")?.[1] ?? "";
    blocks.push({ lang: open[2] as string, code: lines.slice(i + 1, end).join("\n"), line: i + 1, context });
    i = end;
  }
  return blocks;
}

/** The README's library example: its one JavaScript block, run as written by the tests. */
export async function readmeLibraryExample(): Promise<string> {
  const blocks = codeBlocks(await readPage("README.md")).filter((b) => b.lang === "js");
  if (blocks.length !== 1)
    throw new Error(`README.md: expected one js block (the library example), found ${blocks.length}`);
  return (blocks[0] as CodeBlock).code;
}
