// Review of session takeover (issue 27): when the LISTEN connection was refused, openLeases said
// "session takeover is off" and went on, but the store still recorded the notice session with
// every claim (with no feed: always none), so every claim was refused before it was sent
// (NoHolderSession) and the process never led. openLeases now refuses to open instead, as it does
// for sessionTakeover with notify: false, naming the option and the fix.
import { randomBytes } from "node:crypto";
import pg from "pg";
import { afterAll, beforeAll, expect, it } from "vitest";
import { openLeases, SessionTakeoverUnavailable } from "../../src/index.ts";
import { createTestDatabase, type TestDatabase } from "../support/postgres/database.ts";

let db: TestDatabase;
let admin: pg.Pool;
beforeAll(async () => {
  db = await createTestDatabase();
  admin = new pg.Pool({ connectionString: db.url, max: 2 });
});
afterAll(async () => {
  await admin.end();
  await db.drop();
});

/**
 * A role allowed one connection: the pool's, so the LISTEN connection is refused (53300). One per
 * case: a backend leaves pg_stat_activity before it leaves the count CONNECTION LIMIT checks, so
 * a case sharing the role with the one before could be refused its pool connection even after
 * pg_stat_activity showed none of the role left.
 */
async function oneConnectionUrl(): Promise<{ url: string; role: string }> {
  const role = `pglease_one_${randomBytes(3).toString("hex")}`;
  await admin.query(`CREATE ROLE ${role} LOGIN PASSWORD 'one-connection' CONNECTION LIMIT 1`);
  await admin.query(`GRANT ALL ON DATABASE ${db.name} TO ${role}; GRANT ALL ON SCHEMA public TO ${role}`);
  const url = new URL(db.url);
  url.username = role;
  url.password = "one-connection";
  return { url: url.toString(), role };
}

const sessionsOf = async (name: string) =>
  (
    await admin.query<{ n: number }>("SELECT count(*)::int AS n FROM pg_stat_activity WHERE usename = $1", [
      name,
    ])
  ).rows[0]?.n;

it("with session takeover asked for and LISTEN refused, openLeases refuses to open, naming the option and the fix", async () => {
  const { url, role } = await oneConnectionUrl();
  const warnings: string[] = [];
  const opening = openLeases({
    connectionString: url,
    poolSize: 1,
    table: "takeover_one_connection_leases",
    sessionTakeover: true,
    restartTakeover: false,
    logger: { info: () => {}, warn: (message) => warnings.push(message) },
  });
  const error = await opening.then(
    async (leases) => {
      await leases.close();
      return new Error("opened");
    },
    (e: unknown) => e as Error,
  );
  expect(error).toBeInstanceOf(SessionTakeoverUnavailable);
  expect(error.message).toMatch(/^sessionTakeover \(--session-takeover\) needs the notice connection/);
  // The server's own reason, and both ways out.
  expect(error.message).toMatch(/too many connections for role/);
  expect(error.message).toMatch(/no pooler.*one connection more than the pool.*or drop sessionTakeover/);
  expect(error.message).not.toContain("one-connection");
  // Refused, not degraded: nothing said it would go on without takeover.
  expect(warnings.join("\n")).not.toMatch(/polling instead|takeover is off/);
  // The pool it opened is closed again.
  await expect.poll(() => sessionsOf(role), { timeout: 5_000 }).toBe(0);
});

it("without session takeover the same refusal still opens, followers polling, and leads", async () => {
  const { url } = await oneConnectionUrl();
  const warnings: string[] = [];
  const leases = await openLeases({
    connectionString: url,
    poolSize: 1,
    table: "polling_one_connection_leases",
    restartTakeover: false,
    logger: { info: () => {}, warn: (message) => warnings.push(message) },
  });
  try {
    expect(leases.notify).toBe(false);
    expect(warnings.join("\n")).toMatch(/could not LISTEN for release notices.*polling instead/);
    const e = leases.campaign("polled");
    await expect.poll(() => e.isLeader(), { timeout: 5_000 }).toBe(true);
  } finally {
    await leases.close();
  }
});
