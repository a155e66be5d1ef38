// The chaos run restarts its own PostgreSQL: same data directory, same port, committed data kept,
// whether the stop was fast or crash-like (immediate, recovered from the WAL).
import { access } from "node:fs/promises";
import pg from "pg";
import { describe, expect, it } from "vitest";
import { EmbeddedPostgresMissing, startEmbeddedPostgres } from "../support/postgres/embedded-postgres.ts";
import { skipBecause } from "../support/skip.ts";

const server = await startEmbeddedPostgres({ exitHooks: false }).catch((error: unknown) => {
  if (error instanceof EmbeddedPostgresMissing) return null;
  throw error;
});

const skip = skipBecause(
  "embedded PostgreSQL restart",
  server === null && "the package embedded-postgres is not installed",
);

describe.skipIf(skip)("embedded PostgreSQL restart", () => {
  it("keeps committed rows and the port across a fast and an immediate restart, then stops and cleans up", async () => {
    if (!server) return;
    const query = async (sql: string) => {
      const client = new pg.Client({ connectionString: server.url });
      await client.connect();
      try {
        return (await client.query(sql)).rows;
      } finally {
        await client.end();
      }
    };
    try {
      await query("CREATE TABLE kept (n int); INSERT INTO kept VALUES (1)");
      const firstPid = server.pid;
      await server.restart({ mode: "fast" });
      await query("INSERT INTO kept VALUES (2)");
      await server.restart({ mode: "immediate", downMs: 100 });
      expect(await query("SELECT n FROM kept ORDER BY n")).toEqual([{ n: 1 }, { n: 2 }]);
      expect(server.pid).not.toBe(firstPid);
    } finally {
      await server.stop();
    }
    await expect(access(server.dir)).rejects.toThrow();
    await expect(server.restart()).rejects.toThrow(/after stop/);
  });
});
