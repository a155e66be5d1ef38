// A fresh database per test file, dropped afterwards, so files never see each other's rows.
import { randomBytes } from "node:crypto";
import pg from "pg";
import { inject } from "vitest";

export interface TestDatabase {
  url: string;
  name: string;
  drop(): Promise<void>;
}

export function serverUrl(): string {
  return inject("databaseUrl");
}

export async function createTestDatabase(): Promise<TestDatabase> {
  const admin = serverUrl();
  const name = `pglease_t_${randomBytes(6).toString("hex")}`;
  const client = new pg.Client({ connectionString: admin });
  await client.connect();
  try {
    await client.query(`CREATE DATABASE ${name}`);
  } finally {
    await client.end();
  }
  const url = new URL(admin);
  url.pathname = `/${name}`;
  return {
    url: url.toString(),
    name,
    async drop() {
      const c = new pg.Client({ connectionString: admin });
      await c.connect();
      try {
        // pool.end() resolves before its sockets close: wait for those sessions to go, so FORCE
        // does not kill a backend whose client would then raise an error nobody listens to.
        for (let i = 0; i < 100; i++) {
          const { rows } = await c.query(
            "SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = $1",
            [name],
          );
          if (rows[0].n === 0) break;
          await new Promise((resolve) => setTimeout(resolve, 50));
        }
        await c.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
      } finally {
        await c.end();
      }
    },
  };
}
