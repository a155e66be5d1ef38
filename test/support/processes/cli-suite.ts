// The frame of a suite of `pglease run` processes: its own database, an admin pool to look at the
// lease table, and every process it starts killed after each test.
import pg from "pg";
import { afterAll, afterEach, beforeAll } from "vitest";
import { createTestDatabase, type TestDatabase } from "../postgres/database.ts";
import type { Running } from "./cli.ts";

export interface CliSuite {
  /** Set in beforeAll. */
  db: TestDatabase;
  admin: pg.Pool;
  /** Kills it (SIGKILL) after the current test, whatever happened. */
  track(run: Running): Running;
}

export function cliSuite(): CliSuite {
  const running: Running[] = [];
  const suite = {
    track(run: Running) {
      running.push(run);
      return run;
    },
  } as CliSuite;
  beforeAll(async () => {
    suite.db = await createTestDatabase();
    suite.admin = new pg.Pool({ connectionString: suite.db.url, max: 1 });
  });
  afterEach(async () => {
    for (const r of running.splice(0)) await r.stop("SIGKILL");
  });
  afterAll(async () => {
    await suite.admin?.end();
    await suite.db?.drop();
  });
  return suite;
}
