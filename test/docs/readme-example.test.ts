// The README's library example, run as written: the block copied byte for byte into a file of its
// own, `node leader.mjs` as the README says, `pglease` resolving to this checkout's source (the
// installed package runs the same block in test/image/package.test.ts). Two copies compete: one
// leads, and on SIGTERM it releases and the other takes over with a higher fence.
import { type ChildProcess, spawn } from "node:child_process";
import { mkdir, mkdtemp, rm, symlink, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, expect, it } from "vitest";
import { createTestDatabase, type TestDatabase } from "../support/postgres/database.ts";
import { readmeLibraryExample, repoRoot } from "./markdown.ts";

let db: TestDatabase;
let dir: string;
const children: ChildProcess[] = [];

beforeAll(async () => {
  db = await createTestDatabase();
  dir = await mkdtemp(join(tmpdir(), "pglease-readme-"));
  // A package named pglease whose entry point is the checkout's source: node_modules/pglease is a
  // link to it, and Node runs the TypeScript of a file outside node_modules as the demo does.
  const pkg = join(dir, "pglease-source");
  await mkdir(pkg);
  await writeFile(
    join(pkg, "package.json"),
    JSON.stringify({ name: "pglease", type: "module", exports: "./index.ts" }),
  );
  await writeFile(
    join(pkg, "index.ts"),
    `export * from ${JSON.stringify(join(repoRoot, "src", "index.ts"))};\n`,
  );
  await mkdir(join(dir, "node_modules"));
  await symlink(pkg, join(dir, "node_modules", "pglease"), "dir");
  await writeFile(join(dir, "leader.mjs"), await readmeLibraryExample());
});

afterAll(async () => {
  for (const child of children) child.kill("SIGKILL");
  await db?.drop();
  if (dir) await rm(dir, { recursive: true, force: true });
});

function start(): { child: ChildProcess; output: () => string; exited: Promise<number | null> } {
  const child = spawn(process.execPath, ["leader.mjs"], {
    cwd: dir,
    stdio: ["ignore", "pipe", "pipe"],
    env: { PATH: process.env.PATH ?? "", DATABASE_URL: db.url },
  });
  children.push(child);
  let output = "";
  child.stdout?.on("data", (d: Buffer) => {
    output += d.toString();
  });
  child.stderr?.on("data", (d: Buffer) => {
    output += d.toString();
  });
  return { child, output: () => output, exited: new Promise((resolve) => child.on("exit", resolve)) };
}

const fences = (output: string) =>
  [...output.matchAll(/^leading orders-sync with fence (\d+)$/gm)].map((m) => Number(m[1]));

it("leads in one process, and hands over at once to the other on SIGTERM", async () => {
  const first = start();
  await expect.poll(() => fences(first.output()).length, { timeout: 30_000 }).toBeGreaterThan(0);
  const second = start();
  // The second follows: it prints nothing while the first leads.
  await expect.poll(() => fences(first.output()).length, { timeout: 10_000 }).toBeGreaterThan(2);
  expect(fences(second.output()), second.output()).toEqual([]);

  first.child.kill("SIGTERM");
  expect(await first.exited, first.output()).toBe(0);
  // Released, not expired: after the last renew (at most 5 s before) the 15 s lease runs 10 s more.
  const releasedAt = Date.now();
  await expect.poll(() => fences(second.output()).length, { timeout: 10_000 }).toBeGreaterThan(0);
  expect(Date.now() - releasedAt).toBeLessThan(5_000);
  expect(Math.min(...fences(second.output()))).toBeGreaterThan(Math.max(...fences(first.output())));

  second.child.kill("SIGINT");
  expect(await second.exited, second.output()).toBe(0);
}, 90_000);
