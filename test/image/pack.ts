// What the package and image tests share: running a command with its own output in the error,
// and `npm pack` of the working tree (prepack builds dist/ with tsc, as the image's build does).
import { execFile } from "node:child_process";
import { readdir, readFile } from "node:fs/promises";
import { join } from "node:path";
import { promisify } from "node:util";

const execFileAsync = promisify(execFile);

export const root = join(import.meta.dirname, "..", "..");

/** execFile whose failure carries the command's own output (tsc errors from prepack, npm's reasons). */
export async function run(command: string, argv: string[], options: Parameters<typeof execFileAsync>[2]) {
  try {
    return await execFileAsync(command, argv, { maxBuffer: 16 * 1024 * 1024, ...options, encoding: "utf8" });
  } catch (error) {
    const { stdout = "", stderr = "" } = error as { stdout?: string; stderr?: string };
    const tail = `${stdout}\n${stderr}`.trim().split("\n").slice(-15).join("\n");
    throw new Error(`${command} ${argv.join(" ")} failed:\n${tail}`);
  }
}

/** `npm pack` into dir; the tarball's path. */
export async function pack(dir: string): Promise<string> {
  await run("npm", ["pack", "--pack-destination", dir, "--silent"], { cwd: root });
  const [tarball] = (await readdir(dir)).filter((f) => f.endsWith(".tgz"));
  if (tarball === undefined) throw new Error(`npm pack left no tarball in ${dir}`);
  return join(dir, tarball);
}

/** The package's version, as `pglease --version` must print it. */
export async function packageVersion(): Promise<string> {
  return (JSON.parse(await readFile(join(root, "package.json"), "utf8")) as { version: string }).version;
}

/** A PATH with node's own directory first, so `#!/usr/bin/env node` finds this node. */
export function pathWithNode(): string {
  return [join(process.execPath, ".."), process.env.PATH ?? ""].join(":");
}
