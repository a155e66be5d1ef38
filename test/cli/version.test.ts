// `pglease --version` from the source tree and from the built layout the npm package and the
// image ship (dist/cmd, dist/src beside package.json): the version comes from package.json.
import { execFile } from "node:child_process";
import { cp, mkdtemp, readFile, rm, symlink } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { afterAll, beforeAll, expect, it } from "vitest";
import { runPglease } from "../support/processes/cli.ts";

const run = promisify(execFile);
const root = join(import.meta.dirname, "../..");
let built: string;
let expected: string;

beforeAll(async () => {
  expected = (JSON.parse(await readFile(join(root, "package.json"), "utf8")) as { version: string }).version;
  built = await mkdtemp(join(tmpdir(), "pglease-version-"));
  await run(
    process.execPath,
    [
      join(root, "node_modules/typescript/bin/tsc"),
      "-p",
      join(root, "tsconfig.build.json"),
      "--outDir",
      join(built, "dist"),
    ],
    { cwd: root },
  );
  await cp(join(root, "package.json"), join(built, "package.json"));
  await symlink(join(root, "node_modules"), join(built, "node_modules"));
}, 120_000);

afterAll(async () => {
  await rm(built, { recursive: true, force: true });
});

it("prints the version from the source tree, as --version and as a command", async () => {
  for (const argv of [["--version"], ["version"]]) {
    const out = await runPglease(argv);
    expect(out).toMatchObject({ code: 0, stdout: `pglease ${expected}\n`, stderr: "" });
  }
});

it("prints the version from the built package layout", async () => {
  const { stdout, stderr } = await run(process.execPath, [join(built, "dist/cmd/pglease.js"), "--version"]);
  expect(stderr).toBe("");
  expect(stdout).toBe(`pglease ${expected}\n`);
});
