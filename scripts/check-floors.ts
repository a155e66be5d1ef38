// The floors of src/: each folder stands on a floor, and a file may import only from its own
// folder or from a folder on a lower floor. So no folder imports one above it, and no two folders
// import each other: a folder cycle cannot pass. CI runs this (.ci/run), and so does
// test/architecture/floors.test.ts; `node scripts/check-floors.ts` names each import that breaks it.
import { readdirSync, readFileSync } from "node:fs";
import { dirname, join, posix, relative } from "node:path";
import { fileURLToPath } from "node:url";

/**
 * The folders of src/, from the ground up. A folder may import the folders on the floors below
 * its own, never one beside it on its floor or above it. Every folder of src/ stands here: a new
 * folder takes a floor in this list, where the folders it needs are below it.
 */
export const FLOORS: readonly (readonly string[])[] = [
  // What everyone shares: the clock, the fence token, the pod contract's names, the SQL helpers.
  ["shared"],
  // The elector: the pure decision and the loop; no database or Kubernetes import.
  ["election"],
  // The adapters, each on its own: PostgreSQL, the fence guard and readers, the pod publisher.
  ["postgres", "fence", "kube"],
  // Candidates and handovers over the lease store; flags and environment read once.
  ["candidacy", "config"],
  // The composition root of the lease stack; logs and metrics.
  ["leases", "observability"],
  // `pglease run`: the root, the publisher, the health rules, the HTTP endpoints.
  ["sidecar"],
  // The commands.
  ["cli"],
  // The entry points, src/index.ts and src/advanced.ts (the files directly in src/).
  ["."],
];

/** The relative module specifiers a TypeScript file imports: static, re-exported or dynamic. */
export function importsOf(text: string): string[] {
  const found: string[] = [];
  // `import … from "x"` and `export … from "x"` (over several lines), and `import "x"`.
  const statements = [
    /^\s*(?:import|export)\b[^;"]*?\bfrom\s*"(\.{1,2}\/[^"]*)"/gm,
    /^\s*import\s*"(\.{1,2}\/[^"]*)"/gm,
  ];
  for (const pattern of statements) for (const m of text.matchAll(pattern)) found.push(m[1] as string);
  for (const m of text.matchAll(/\bimport\(\s*"(\.{1,2}\/[^"]*)"\s*\)/g)) found.push(m[1] as string);
  return found;
}

/** The folder of a path under src/ ("kube" for "kube/client/connection.ts", "." for "index.ts"). */
function folderOf(pathInSrc: string): string {
  const slash = pathInSrc.indexOf("/");
  return slash < 0 ? "." : pathInSrc.slice(0, slash);
}

function name(folder: string): string {
  return folder === "." ? "the entry points in src/" : `src/${folder}/`;
}

/**
 * Every import that breaks the floors, one line each, for the files given (path under src/ →
 * source text); none when the floors hold. A folder not in FLOORS is one problem of its own.
 */
export function floorProblems(
  files: ReadonlyMap<string, string>,
  floors: readonly (readonly string[])[] = FLOORS,
): string[] {
  const floorOf = new Map<string, number>();
  floors.forEach((folders, index) => {
    for (const folder of folders) floorOf.set(folder, index + 1);
  });
  const problems: string[] = [];
  const unlisted = new Set<string>();
  for (const [path, text] of files) {
    const from = folderOf(path);
    const fromFloor = floorOf.get(from);
    if (fromFloor === undefined) {
      if (!unlisted.has(from)) problems.push(`${name(from)} stands on no floor: give it one in FLOORS`);
      unlisted.add(from);
      continue;
    }
    for (const specifier of importsOf(text)) {
      const target = posix.normalize(posix.join(posix.dirname(path), specifier));
      if (target.startsWith("../")) continue; // outside src/ (package.json, say): no floor
      const to = folderOf(target);
      if (to === from) continue;
      const toFloor = floorOf.get(to);
      if (toFloor === undefined || toFloor < fromFloor) continue; // an unlisted folder is named above
      const where = toFloor === fromFloor ? "beside" : "above";
      problems.push(
        `src/${path} imports src/${target}: ${name(to)} (floor ${toFloor}) is ${where} ${name(from)} (floor ${fromFloor})`,
      );
    }
  }
  return problems;
}

/** The TypeScript files under `srcDir`, by path under it. */
export function readSources(srcDir: string): Map<string, string> {
  const files = new Map<string, string>();
  for (const entry of readdirSync(srcDir, { recursive: true, withFileTypes: true })) {
    if (!entry.isFile() || !entry.name.endsWith(".ts")) continue;
    const path = join(entry.parentPath, entry.name);
    files.set(relative(srcDir, path).split("\\").join("/"), readFileSync(path, "utf8"));
  }
  return files;
}

export const SRC = join(dirname(fileURLToPath(import.meta.url)), "..", "src");

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const problems = floorProblems(readSources(SRC));
  for (const problem of problems) console.error(problem);
  if (problems.length > 0) {
    console.error(`${problems.length} import(s) break the floors of src/ (scripts/check-floors.ts)`);
    process.exit(1);
  }
  console.log(`the floors of src/ hold: ${FLOORS.map((f) => f.join(", ")).join(" | ")}`);
}
