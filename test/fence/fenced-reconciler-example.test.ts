// Runs the example as users would (`node deploy/examples/fenced-reconciler/main.ts`, type stripping)
// against a real PostgreSQL and a local stand-in for the sidecar's /status.
import { type ChildProcess, spawn } from "node:child_process";
import { mkdtemp, rm } from "node:fs/promises";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createInterface } from "node:readline";
import pg from "pg";
import { afterAll, beforeAll, expect, it } from "vitest";
import { createTestDatabase, type TestDatabase } from "../support/postgres/database.ts";
import { kubeletVolume } from "./kubelet-volume.ts";

let db: TestDatabase;
let server: Server;
let statusUrl: string;
let fence = 5;
const running = new Set<ChildProcess>();

beforeAll(async () => {
  db = await createTestDatabase();
  server = createServer((_req, res) => {
    const lease = { lease: "orders-sync", role: "leader", fence, leader: "web-7d9f-abc12" };
    res.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify({ leases: [lease] }));
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  statusUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}/status`;
});

afterAll(async () => {
  for (const child of running) child.kill("SIGKILL");
  server.closeAllConnections();
  await new Promise((resolve) => server.close(resolve));
  await db.drop();
});

/** Waits for the next log line with a given message, consuming the lines before it. */
function linesOf(
  child: ChildProcess,
  stderr: () => string,
): { next(message: string): Promise<Record<string, unknown>> } {
  const seen: Array<Record<string, unknown>> = [];
  let waiter: (() => void) | undefined;
  createInterface({ input: child.stdout as NodeJS.ReadableStream }).on("line", (line) => {
    seen.push(JSON.parse(line));
    waiter?.();
  });
  return {
    next: (message) =>
      new Promise((resolve, reject) => {
        const deadline = setTimeout(() => {
          waiter = undefined;
          reject(
            new Error(`no "${message}" line within 15 s; unread ${JSON.stringify(seen)}; stderr ${stderr()}`),
          );
        }, 15_000);
        waiter = () => {
          const i = seen.findIndex((l) => l.message === message);
          if (i < 0) return;
          waiter = undefined;
          clearTimeout(deadline);
          resolve(seen.splice(0, i + 1)[i] as Record<string, unknown>);
        };
        waiter();
      }),
  };
}

interface RunningExample {
  next(message: string): Promise<Record<string, unknown>>;
  /** SIGTERM, then the exit code and everything written to stderr. */
  stop(): Promise<{ code: number | null; stderr: string }>;
}

function runExample(env: Record<string, string>): RunningExample {
  const child = spawn(process.execPath, ["deploy/examples/fenced-reconciler/main.ts"], {
    env: { PATH: process.env.PATH, DATABASE_URL: db.url, RECONCILE_INTERVAL_MS: "30", ...env },
    stdio: ["ignore", "pipe", "pipe"],
  });
  running.add(child);
  let stderr = "";
  child.stderr?.on("data", (chunk) => {
    stderr += chunk;
  });
  const exited = new Promise<number | null>((resolve) => child.once("exit", (code) => resolve(code)));
  const lines = linesOf(child, () => stderr);
  return {
    next: lines.next,
    async stop() {
      child.kill("SIGTERM");
      await lines.next("stopped");
      const code = await exited;
      running.delete(child);
      return { code, stderr };
    },
  };
}

async function guardFence(): Promise<number> {
  const client = new pg.Client({ connectionString: db.url });
  await client.connect();
  try {
    const { rows } = await client.query(
      "SELECT fence::int FROM pglease_fences WHERE resource = 'orders-sync'",
    );
    return rows[0].fence;
  } finally {
    await client.end();
  }
}

it("reading /status: writes through the guard while it leads, and stops at a stale fence", async () => {
  const example = runExample({ LEADER_STATUS_URL: statusUrl });
  expect(await example.next("wrote")).toMatchObject({ fence: 5 });
  // A pod whose sidecar still reports an older term is refused by the guard, not by its own belief.
  fence = 4;
  expect(await example.next("refused")).toMatchObject({ fence: 4, currentFence: 5 });
  expect(await example.next("stale fence: waiting for a new term")).toMatchObject({ fence: 4 });
  fence = 6;
  expect(await example.next("wrote")).toMatchObject({ fence: 6 });
  expect(await example.stop()).toEqual({ code: 0, stderr: "" });
  expect(await guardFence()).toBe(6);
});

it("reading the downward API folder: follows the kubelet's swaps", async () => {
  const dir = await mkdtemp(join(tmpdir(), "pglease-example-"));
  try {
    const volume = kubeletVolume(dir);
    await volume.update({ role: "follower", fence: "", lease: "" });
    const example = runExample({ FENCE_SOURCE: "downward-api", LEADER_INFO_DIR: dir });
    await example.next("follower: not reconciling");
    await volume.update({ role: "leader", fence: "9", lease: "orders-sync" });
    expect(await example.next("wrote")).toMatchObject({ fence: 9 });
    expect(await example.stop()).toEqual({ code: 0, stderr: "" });
    expect(await guardFence()).toBe(9);
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
});
