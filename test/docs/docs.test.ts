// The docs as a reader meets them: a README that stays a front door, links and anchors that lead
// somewhere, and code examples that compile against the package as it is.
import { execFile } from "node:child_process";
import { existsSync } from "node:fs";
import { mkdir, rm, writeFile } from "node:fs/promises";
import { createRequire } from "node:module";
import { dirname, join, normalize, relative } from "node:path";
import { promisify } from "node:util";
import { describe, expect, it } from "vitest";
import {
  anchorsOf,
  codeBlocks,
  docPages,
  githubSlug,
  linkedPages,
  linksOf,
  readPage,
  repoRoot,
} from "./markdown.ts";

const README_MAX_LINES = 300;

it(`keeps the README a front door: at most ${README_MAX_LINES} lines`, async () => {
  const lines = (await readPage("README.md")).trimEnd().split("\n").length;
  expect(lines, "README.md grew: move the detail into docs/ and link to it").toBeLessThanOrEqual(
    README_MAX_LINES,
  );
});

describe("links and anchors", () => {
  it("slugs headings as GitHub does", () => {
    expect(githubSlug("Leadership follows the application's health")).toBe(
      "leadership-follows-the-applications-health",
    );
    expect(githubSlug("`pglease history [KEY]`")).toBe("pglease-history-key");
    expect(githubSlug("Candidates, handover and rolling updates")).toBe(
      "candidates-handover-and-rolling-updates",
    );
    expect(githubSlug("The readiness gate (opt-in, read this first)")).toBe(
      "the-readiness-gate-opt-in-read-this-first",
    );
    expect([...anchorsOf("# A\n## A\n```\n# not a heading\n```\n")]).toEqual(["a", "a-1"]);
  });

  it("resolves every relative link and #anchor of the README, docs/, the charts' and examples' READMEs", async () => {
    const broken: string[] = [];
    for (const page of await linkedPages()) {
      for (const { target, line } of linksOf(await readPage(page))) {
        if (/^[a-z][a-z+.-]*:/i.test(target)) continue; // https:, mailto:: not ours to keep alive
        const [path = "", anchor] = target.split("#", 2);
        const file = path === "" ? page : normalize(join(dirname(page), decodeURIComponent(path)));
        const where = `${page}:${line}: ${target}`;
        if (relative(repoRoot, join(repoRoot, file)).startsWith(".."))
          broken.push(`${where} (outside the repository)`);
        else if (!existsSync(join(repoRoot, file))) broken.push(`${where} (no such file)`);
        else if (
          anchor !== undefined &&
          file.endsWith(".md") &&
          !anchorsOf(await readPage(file)).has(anchor)
        ) {
          broken.push(`${where} (no heading with that anchor in ${file})`);
        }
      }
    }
    expect(broken).toEqual([]);
  });
});

describe("code examples", () => {
  it("type-check against the package: every ts and js block of the README and docs/", async () => {
    const dir = join(repoRoot, ".tmp", "docs-examples");
    await rm(dir, { recursive: true, force: true });
    await mkdir(dir, { recursive: true });
    const files: string[] = [];
    for (const page of await docPages()) {
      for (const block of codeBlocks(await readPage(page))) {
        const ext = { ts: "ts", js: "mjs" }[block.lang];
        if (ext === undefined) continue;
        const name = `${page.replace(/[/.]/g, "_")}_${block.line}.${ext}`;
        // export {}: each block is a module of its own, so top-level await and its names stay in it.
        await writeFile(join(dir, name), `${block.context}\n${block.code}\nexport {};\n`);
        files.push(name);
      }
    }
    expect(files.length).toBeGreaterThan(3);
    await writeFile(
      join(dir, "tsconfig.json"),
      JSON.stringify({
        extends: "../../tsconfig.json",
        compilerOptions: {
          noEmit: true,
          allowJs: true,
          checkJs: true,
          rootDir: "../..",
          // The examples import the package by its name, as an application does: its source here.
          paths: { pglease: ["../../src/index.ts"], "pglease/advanced": ["../../src/advanced.ts"] },
        },
        files,
      }),
    );
    const tsc = join(
      dirname(createRequire(import.meta.url).resolve("typescript/package.json")),
      "bin",
      "tsc",
    );
    const result = await promisify(execFile)(process.execPath, [tsc, "-p", join(dir, "tsconfig.json")], {
      cwd: dir,
    }).then(
      () => "",
      (error: { stdout?: string; stderr?: string }) => `${error.stdout ?? ""}${error.stderr ?? ""}`,
    );
    // A failure names the page and line: files are named after them (docs_library_md_73.ts).
    expect(result.trim()).toBe("");
    await rm(dir, { recursive: true, force: true });
  }, 120_000);
});
