// Review of session takeover (issue 27): when the LISTEN connection is refused, openLeases says
// "session takeover is off" and followers poll, but the store still records the notice session
// with every claim (holderSession = () => feed?.session() ?? null, with no feed: always null), so
// every claim is refused before it is sent (NoHolderSession) and this process never leads.
import { randomBytes } from "node:crypto";
import pg from "pg";
import { afterAll, beforeAll, expect, it } from "vitest";
import { openLeases } from "../../src/index.ts";
import { createTestDatabase, type TestDatabase } from "../support/database.ts";

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

it("with session takeover asked for and LISTEN refused, the process still leads (as the warning says: takeover off)", async () => {
  // A role allowed one connection: the pool's. The LISTEN connection is refused (53300).
  const role = `pglease_one_${randomBytes(3).toString("hex")}`;
  await admin.query(`CREATE ROLE ${role} LOGIN PASSWORD 'one-connection' CONNECTION LIMIT 1`);
  await admin.query(`GRANT ALL ON DATABASE ${db.name} TO ${role}; GRANT ALL ON SCHEMA public TO ${role}`);
  const url = new URL(db.url);
  url.username = role;
  url.password = "one-connection";
  const warnings: string[] = [];
  const leases = await openLeases({
    connectionString: url.toString(),
    poolSize: 1,
    table: "takeover_one_connection_leases",
    sessionTakeover: true,
    restartTakeover: false,
    logger: { info: () => {}, warn: (message) => warnings.push(message) },
  });
  try {
    expect(leases.notify).toBe(false);
    expect(warnings.join("\n")).toMatch(/session takeover is off: LISTEN was refused/);
    const e = leases.campaign("polled");
    const sentences: string[] = [];
    e.on("tick", (t) => sentences.push(t.sentence));
    // On failure the poll shows the elector's last sentence instead of false.
    await expect.poll(() => e.isLeader() || sentences.at(-1), { timeout: 5_000 }).toBe(true);
  } finally {
    await leases.close();
  }
});
