// The last lines of `pglease run` reach a log reader that is behind: in a pod, stdout is a pipe to
// the runtime's log shim, and the lines Node still queues for it when the process exits are the
// ones that say why it stopped. A reader that never reads must not keep the process alive either.
// The real command against a real PostgreSQL; the test is the log reader.
import { type ChildProcessByStdio, spawn } from "node:child_process";
import type { Readable } from "node:stream";
import { setTimeout as delay } from "node:timers/promises";
import { afterEach, describe, expect, it } from "vitest";
import { freePort } from "../support/postgres/embedded-postgres.ts";
import { lockRow, type RowLock } from "../support/postgres/row-lock.ts";
import { PGLEASE, runPglease } from "../support/processes/cli.ts";
import { cliSuite } from "../support/processes/cli-suite.ts";

const suite = cliSuite();

// Enough output to back stdout up past the pipe's 64 KiB and this side's read buffer, and less
// than the logger's 1 MiB queue, past which it drops lines: the campaigning line names every lease
// twice, and each lease gets lines of its own (acquired, released) of some 900 bytes.
const LEASES = 250;
const leaseNames = (prefix: string) =>
  Array.from({ length: LEASES }, (_, i) => `${prefix}-${String(i).padStart(3, "0")}-`.padEnd(200, "x"));

interface Unread {
  child: ChildProcessByStdio<null, Readable, Readable>;
  /** Its exit code, once it has exited (its pipe may still hold output). */
  exited: Promise<number | null>;
  /** Reads from now on: everything the child wrote that reached the pipe, once it ends. */
  readAll(): Promise<string>;
}

const started: Unread[] = [];
const locks: RowLock[] = [];
afterEach(async () => {
  for (const { child } of started.splice(0)) child.kill("SIGKILL");
  for (const lock of locks.splice(0)) await lock.rollback();
});

/**
 * `pglease run` for LEASES leases with stdout a pipe nobody reads yet, once it holds them all. A
 * minute's lease: no renewal comes during a test, so a statement waiting for a lock is a release.
 */
async function leadingUnread(prefix: string, extra: readonly string[] = []): Promise<Unread> {
  expect((await runPglease(["migrate"], { DATABASE_URL: suite.db.url })).code).toBe(0);
  const http = `127.0.0.1:${await freePort()}`;
  const args = ["run", "--lease", leaseNames(prefix).join(","), "--http-addr", http, "--duration", "1m"];
  const child = spawn(process.execPath, [PGLEASE, ...args, ...extra], {
    env: {
      PATH: process.env.PATH,
      HOME: process.env.HOME,
      NODE_NO_WARNINGS: "1",
      DATABASE_URL: suite.db.url,
    },
    stdio: ["ignore", "pipe", "pipe"],
  });
  // Unread until the test says, not dropped: without a 'readable' listener, Node resumes (and
  // discards) a child's output once the child exits.
  let reading = false;
  let text = "";
  const take = () => {
    if (!reading) return;
    for (let chunk: string | null = child.stdout.read(); chunk !== null; chunk = child.stdout.read())
      text += chunk;
  };
  child.stdout.setEncoding("utf8");
  child.stdout.on("readable", take);
  const ended = new Promise<string>((resolve) => child.stdout.on("end", () => resolve(text)));
  const run: Unread = {
    child,
    exited: new Promise((resolve) => child.once("exit", resolve)),
    readAll() {
      reading = true;
      take();
      return ended;
    },
  };
  started.push(run);
  // The lease table, not the log, says it leads: the log is what stays unread.
  for (;;) {
    const { rows } = await suite.admin.query<{ held: number }>(
      "SELECT count(*)::int AS held FROM pglease_leases WHERE key LIKE $1 AND expires_at > clock_timestamp()",
      [`${prefix}-%`],
    );
    if (rows[0]?.held === LEASES) return run;
    if (child.exitCode !== null) throw new Error(`pglease run exited ${child.exitCode} before leading`);
    await delay(50);
  }
}

/** A SIGTERM whose graceful stop cannot finish: its release waits behind a row lock. */
async function stopThatHangs(run: Unread, prefix: string): Promise<void> {
  const lock = await lockRow(suite.db.url, "public.pglease_leases", leaseNames(prefix)[0] as string);
  locks.push(lock);
  run.child.kill("SIGTERM");
  // Waiting for the lock: the first SIGTERM was taken, so the next one is a second.
  await expect.poll(() => lock.waiting(), { timeout: 10_000, interval: 10 }).toBe(1);
}

/** The JSON lines' messages, once the output is known to end whole with the line of `last`. */
function messages(out: string, last: string): string[] {
  expect(out.slice(-200)).toMatch(new RegExp(`"msg":"${last}"}\n$`));
  return out
    .split("\n")
    .filter((l) => l !== "")
    .map((l) => String((JSON.parse(l) as { msg?: unknown }).msg));
}

const acquired = (msgs: string[], prefix: string) =>
  msgs.filter((m) => new RegExp(`^acquired lease ${prefix}-\\d{3}-x+ with fence \\d+$`).test(m));

/** Ten times the flush's bound: what a hang takes to fail here, not a speed target. */
const HANG_MS = 10_000;
const exitOrHang = (run: Unread) => Promise.race([run.exited, delay(HANG_MS).then(() => "still running")]);

describe("a log reader that is behind", () => {
  it("gets every line up to a second SIGTERM's, which exits 130", async () => {
    const run = await leadingUnread("second");
    await stopThatHangs(run, "second");
    run.child.kill("SIGTERM");
    // The reader comes back 200 ms later, or once the process is gone.
    await Promise.race([run.exited, delay(200)]);
    const out = await run.readAll();
    expect(await run.exited).toBe(130);
    const msgs = messages(out, "second SIGTERM: exiting now without finishing the graceful stop");
    expect(acquired(msgs, "second")).toHaveLength(LEASES);
    expect(msgs).toContain("SIGTERM: stopping leader work, demoting the pod, releasing the lease");
  });

  it("gets every line up to the grace period's running out, which exits 1", async () => {
    const run = await leadingUnread("grace", ["--grace-period", "1s"]);
    await stopThatHangs(run, "grace");
    // The reader comes back 200 ms after the grace period, or once the process is gone.
    await Promise.race([run.exited, delay(1200)]);
    const out = await run.readAll();
    expect(await run.exited).toBe(1);
    const msgs = messages(out, "graceful stop did not finish within 1000 ms: exiting");
    expect(acquired(msgs, "grace")).toHaveLength(LEASES);
    expect(msgs).toContain("SIGTERM: stopping leader work, demoting the pod, releasing the lease");
  });
});

describe("a log reader that never reads", () => {
  it("does not keep a second SIGTERM from exiting 130", async () => {
    const run = await leadingUnread("stalled");
    await stopThatHangs(run, "stalled");
    run.child.kill("SIGTERM");
    expect(await exitOrHang(run)).toBe(130);
    // What fitted in the pipe is still there.
    expect(await run.readAll()).toMatch(/^\{"level":"info"/);
  });

  it("does not keep a finished graceful stop from exiting 0", async () => {
    const run = await leadingUnread("finished");
    run.child.kill("SIGTERM");
    // The release went through: the stop is done, only the log is left to write.
    await expect
      .poll(async () => {
        const { rows } = await suite.admin.query<{ held: number }>(
          "SELECT count(*)::int AS held FROM pglease_leases WHERE key LIKE 'finished-%' AND expires_at > clock_timestamp()",
        );
        return rows[0]?.held;
      })
      .toBe(0);
    expect(await exitOrHang(run)).toBe(0);
    expect(await run.readAll()).toMatch(/^\{"level":"info"/);
  });
});
