// A real PgBouncer in transaction mode in front of the test PostgreSQL, for the tests that
// pin down what works behind it. The binary comes from Debian's pgbouncer package (.ci/run
// installs it); without it the tests say so and skip.
import { type ChildProcess, spawn } from "node:child_process";
import { existsSync } from "node:fs";
import { chmod, mkdtemp, rm, writeFile } from "node:fs/promises";
import { connect } from "node:net";
import { tmpdir, userInfo } from "node:os";
import { join } from "node:path";
import { freePort } from "./embedded-postgres.ts";

export const PGBOUNCER = ["/usr/sbin/pgbouncer", "/usr/bin/pgbouncer"].find((p) => existsSync(p)) ?? null;

export interface Bouncer {
  /** The same database URL, through PgBouncer. */
  url: string;
  stop(): Promise<void>;
}

async function listening(port: number, deadline: number): Promise<void> {
  while (Date.now() < deadline) {
    const ok = await new Promise<boolean>((resolve) => {
      const socket = connect(port, "127.0.0.1", () => {
        socket.destroy();
        resolve(true);
      });
      socket.on("error", () => resolve(false));
    });
    if (ok) return;
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  throw new Error(`pgbouncer did not listen on ${port}`);
}

export async function startPgBouncer(databaseUrl: string, poolSize = 2): Promise<Bouncer> {
  if (!PGBOUNCER) throw new Error("pgbouncer is not installed (apt-get install pgbouncer)");
  const target = new URL(databaseUrl);
  const dir = await mkdtemp(join(tmpdir(), "pglease-pgbouncer-"));
  await chmod(dir, 0o777);
  const port = await freePort();
  const database = target.pathname.slice(1);
  const password = decodeURIComponent(target.password);
  await writeFile(
    join(dir, "pgbouncer.ini"),
    [
      "[databases]",
      `${database} = host=${target.hostname} port=${target.port} dbname=${database} user=${decodeURIComponent(target.username)} password=${password}`,
      "[pgbouncer]",
      "listen_addr = 127.0.0.1",
      `listen_port = ${port}`,
      `unix_socket_dir = ${dir}`,
      "auth_type = any",
      "pool_mode = transaction",
      `default_pool_size = ${poolSize}`,
      "ignore_startup_parameters = extra_float_digits,options,application_name",
      `logfile = ${join(dir, "pgbouncer.log")}`,
      `pidfile = ${join(dir, "pgbouncer.pid")}`,
      "",
    ].join("\n"),
  );
  // PgBouncer refuses to run as root; the embedded server's "postgres" user serves.
  const asRoot = userInfo().uid === 0 ? ["-u", "postgres"] : [];
  const child: ChildProcess = spawn(PGBOUNCER, [...asRoot, join(dir, "pgbouncer.ini")], { stdio: "ignore" });
  await listening(port, Date.now() + 10_000);
  const url = new URL(databaseUrl);
  url.hostname = "127.0.0.1";
  url.port = String(port);
  return {
    url: url.toString(),
    async stop() {
      if (child.exitCode === null) {
        const exited = new Promise((resolve) => child.once("exit", resolve));
        child.kill("SIGINT");
        await exited;
      }
      await rm(dir, { recursive: true, force: true });
    },
  };
}
