// The demo and the tests run as root in many containers, from a checkout under /root (mode 700):
// the embedded PostgreSQL, which runs as the "postgres" user, could not reach its binaries and
// the process died of an unhandled `spawn … initdb EACCES`. Now the folder is found first.
import { chmod, mkdir, mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, expect, it } from "vitest";
import { EmbeddedPostgresUnreachable, folderClosedToOthers } from "../../src/cli/demo/embedded-postgres.ts";

let top: string;
beforeAll(async () => {
  top = await mkdtemp(join(tmpdir(), "pglease-perm-"));
});
afterAll(async () => {
  await rm(top, { recursive: true, force: true });
});

it("names the first folder on the way to the binary that other users cannot enter", async () => {
  const home = join(top, "root");
  const bin = join(home, "clone", "node_modules", "bin");
  await mkdir(bin, { recursive: true, mode: 0o755 });
  await writeFile(join(bin, "initdb"), "");
  await chmod(top, 0o755);
  await chmod(home, 0o700);
  expect(await folderClosedToOthers(join(bin, "initdb"))).toBe(home);
  await chmod(home, 0o755);
  expect(await folderClosedToOthers(join(bin, "initdb"))).toBeNull();
});

it("says in one sentence why and what to do", () => {
  const error = new EmbeddedPostgresUnreachable("/root");
  expect(error.message).toBe(
    'the embedded PostgreSQL runs as the "postgres" user (PostgreSQL refuses root), which cannot enter /root: ' +
      "move the checkout to a folder other users can enter (such as /work or /tmp), or run chmod o+x on /root " +
      "and its parents, or use an existing server with --database-url (or DATABASE_URL)",
  );
  expect(error.message).not.toContain("\n");
});
