// Finds a real PostgreSQL for the whole test run: DATABASE_URL when set, else a
// testcontainers PostgreSQL when a container runtime answers, else an embedded server
// (real binaries from npm). Each test file then makes its own database on it.
import type { TestProject } from "vitest/node";
import { containerRuntimeAnswers } from "./container-runtime.ts";
import { startEmbeddedPostgres } from "./embedded-postgres.ts";

declare module "vitest" {
  export interface ProvidedContext {
    databaseUrl: string;
    databaseSource: string;
  }
}

export default async function setup(project: TestProject): Promise<() => Promise<void>> {
  const fromEnv = process.env.DATABASE_URL;
  if (fromEnv) {
    project.provide("databaseUrl", fromEnv);
    project.provide("databaseSource", "DATABASE_URL");
    return async () => {};
  }
  if (process.env.PGLEASE_TEST_NO_CONTAINERS !== "1" && (await containerRuntimeAnswers())) {
    const { PostgreSqlContainer } = await import("@testcontainers/postgresql");
    const container = await new PostgreSqlContainer("postgres:17-alpine").start();
    project.provide("databaseUrl", container.getConnectionUri());
    project.provide("databaseSource", "testcontainers");
    return async () => {
      await container.stop();
    };
  }
  // No exit hooks: the package's would call process.exit at the end and turn a failed run's exit code into 0.
  const server = await startEmbeddedPostgres({ exitHooks: false });
  project.provide("databaseUrl", server.url);
  project.provide("databaseSource", "embedded-postgres");
  console.log(
    `[pglease tests] no DATABASE_URL and no container runtime: using embedded-postgres at port ${server.port}`,
  );
  return () => server.stop();
}
