// docs/api.md's example of pglease/advanced, as written (test/docs type-checks it with the other
// examples), run against a real PostgreSQL until it leads, and stopped with SIGTERM: it must
// release the lease and end by itself.
import { spawn } from "node:child_process";
import { mkdir, readFile, rm, writeFile } from "node:fs/promises";
import { join } from "node:path";
import pg from "pg";
import { afterAll, beforeAll, expect, it } from "vitest";
import { createTestDatabase, type TestDatabase } from "../support/postgres/database.ts";

const root = join(import.meta.dirname, "..", "..");
// Inside the checkout (.tmp/ is ignored), so the example's import resolves to the source and pg.
const dir = join(root, ".tmp", "advanced-example");

let db: TestDatabase;
beforeAll(async () => {
  db = await createTestDatabase();
  await mkdir(dir, { recursive: true });
});
afterAll(async () => {
  await db?.drop();
  await rm(dir, { recursive: true, force: true });
});

it("runs as written: leads with a fence, releases on SIGTERM and exits 0", async () => {
  const doc = await readFile(join(root, "docs", "api.md"), "utf8");
  const example = /```ts\n(import [^\n]* from "pglease\/advanced";[\s\S]*?)```/.exec(doc)?.[1];
  expect(example, "docs/api.md has a ts block importing pglease/advanced").toBeDefined();
  const file = join(dir, "example.ts");
  await writeFile(file, (example ?? "").replace('"pglease/advanced"', '"../../src/advanced.ts"'));

  const child = spawn(process.execPath, [file], {
    cwd: dir,
    stdio: ["ignore", "pipe", "pipe"],
    env: { PATH: process.env.PATH ?? "", DATABASE_URL: db.url },
  });
  let output = "";
  const keep = (d: Buffer) => {
    output += d.toString();
  };
  child.stdout?.on("data", keep);
  child.stderr?.on("data", keep);
  const exited = new Promise<number | null>((resolve) => child.on("exit", resolve));
  const admin = new pg.Pool({ connectionString: db.url, max: 1 });
  try {
    await expect.poll(() => output, { timeout: 30_000 }).toMatch(/^leading with fence \d+$/m);
    child.kill("SIGTERM");
    expect(await exited, output).toBe(0);
    // Released, not left to expire: the row's expiry is already behind the server's clock.
    const { rows } = await admin.query<{ held: boolean }>(
      "SELECT expires_at > clock_timestamp() AS held FROM public.pglease_leases WHERE key = 'orders-sync'",
    );
    expect(rows).toEqual([{ held: false }]);
  } finally {
    child.kill("SIGKILL");
    await admin.end();
  }
}, 90_000);
