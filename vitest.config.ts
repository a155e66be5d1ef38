import { defineConfig } from "vitest/config";

export default defineConfig({
  test: {
    include: ["test/**/*.test.ts"],
    globalSetup: ["test/support/postgres/global-postgres.ts"],
    testTimeout: 60_000,
    hookTimeout: 120_000,
    // Two cores: more workers only queue behind each other and one PostgreSQL server.
    maxWorkers: 2,
  },
});
