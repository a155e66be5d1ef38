// Readiness waits for the pod's candidacy: a new pod of a rollout that turned Ready before its row
// was in the candidates table let the Deployment controller delete an old leader, which then
// reserved its lease for another OLD pod (the only live candidates it could see), so leadership
// moved twice in one rollout (test/sidecar/rollout.test.ts, under load). Here the announcement is
// held back by a lock on the candidates table, as a slow first statement would hold it.
import pg from "pg";
import { afterAll, afterEach, beforeAll, expect, it } from "vitest";
import { migrate } from "../../src/postgres/migrate.ts";
import { leaseTable } from "../../src/postgres/table.ts";
import { createTestDatabase, type TestDatabase } from "../support/postgres/database.ts";
import { type Running, startLeaseRun } from "../support/processes/cli.ts";

let db: TestDatabase;
const table = leaseTable();
const running: Running[] = [];
const clients: pg.Client[] = [];

beforeAll(async () => {
  db = await createTestDatabase();
  const pool = new pg.Pool({ connectionString: db.url, max: 1 });
  await migrate(pool, table);
  await pool.end();
});
afterEach(async () => {
  for (const r of running.splice(0)) await r.stop("SIGKILL");
  for (const c of clients.splice(0)) await c.end().catch(() => {});
});
afterAll(async () => {
  await db.drop();
});

async function connect(): Promise<pg.Client> {
  const client = new pg.Client({ connectionString: db.url });
  await client.connect();
  clients.push(client);
  return client;
}

const rowsOf = async (client: pg.Client, holder: string) =>
  (await client.query(`SELECT pod FROM ${table.candidates} WHERE key = 'gate' AND holder = $1`, [holder]))
    .rows.length;

it("is not ready before the pod is recorded as a candidate, and ready once it is", async () => {
  const blocker = await connect();
  // Blocks the announcement's INSERT (ROW EXCLUSIVE), not the lease statements nor reads.
  await blocker.query("BEGIN");
  await blocker.query(`LOCK TABLE ${table.candidates} IN SHARE ROW EXCLUSIVE MODE`);
  // A 15 s lease: readiness gives up waiting for a candidacy that keeps failing after one lease
  // duration, far longer than this test holds the lock.
  const { run, port } = await startLeaseRun("gate", "15s", { DATABASE_URL: db.url });
  running.push(run);
  const acquired = await run.waitForLog(/^acquired lease gate with fence \d+$/);
  const holder = String(acquired.holder);
  const readyz = async () => {
    const res = await fetch(`http://127.0.0.1:${port}/readyz`);
    return { status: res.status, body: (await res.json()) as { status: string; reason?: string } };
  };
  // The lease store has answered (the claim landed): the only thing readiness may wait for now is
  // the candidacy. Before the fix /readyz answered 200 here, with no row for this pod.
  await expect.poll(async () => JSON.stringify((await readyz()).body)).not.toMatch(/lease store/);
  const waiting = await readyz();
  expect(await rowsOf(blocker, holder)).toBe(0);
  expect(waiting.status).toBe(503);
  expect(waiting.body.reason).toMatch(/^starting: not yet recorded as a candidate/);

  await blocker.query("COMMIT");
  await expect.poll(async () => (await readyz()).status, { timeout: 10_000 }).toBe(200);
  expect(await rowsOf(await connect(), holder)).toBe(1);
});

it("tries a failed first recording again after a retry interval, still not ready meanwhile", async () => {
  const blocker = await connect();
  await blocker.query("BEGIN");
  await blocker.query(`LOCK TABLE ${table.candidates} IN SHARE ROW EXCLUSIVE MODE`);
  const { run, port } = await startLeaseRun("retried", "15s", { DATABASE_URL: db.url });
  running.push(run);
  const acquired = await run.waitForLog(/^acquired lease retried with fence \d+$/);
  // The announcement gave up at its lock timeout (the call timeout, 2.5 s here).
  await run.waitForLog(/^could not record this process as a candidate; trying again/);
  const res = await fetch(`http://127.0.0.1:${port}/readyz`);
  expect(res.status).toBe(503);
  expect(((await res.json()) as { reason: string }).reason).toMatch(
    /^starting: not yet recorded as a candidate \(its last try failed/,
  );

  await blocker.query("COMMIT");
  // The next try comes a retry interval (200 ms) later, not at the refresh one lease duration
  // (15 s) later, which is also when readiness would stop waiting without the row.
  await expect
    .poll(async () => (await fetch(`http://127.0.0.1:${port}/readyz`)).status, { timeout: 8_000 })
    .toBe(200);
  const rows = await (await connect()).query(
    `SELECT 1 FROM ${table.candidates} WHERE key = 'retried' AND holder = $1`,
    [String(acquired.holder)],
  );
  expect(rows.rowCount).toBe(1);
});

it("does not wait for a candidacy its role is refused: it warns with the GRANT and is ready", async () => {
  const owner = await connect();
  const role = `pglease_no_candidacy_${process.pid}`;
  await owner.query(`CREATE ROLE ${role} LOGIN PASSWORD 'refused'`);
  await owner.query(`GRANT USAGE ON SCHEMA public TO ${role}`);
  await owner.query(`GRANT ALL ON ALL TABLES IN SCHEMA public TO ${role}`);
  await owner.query(`GRANT ALL ON ALL SEQUENCES IN SCHEMA public TO ${role}`);
  await owner.query(`REVOKE INSERT, UPDATE, DELETE ON ${table.candidates} FROM ${role}`);
  const url = new URL(db.url);
  url.username = role;
  url.password = "refused";
  const { run, port } = await startLeaseRun("refused", "15s", { DATABASE_URL: url.toString() });
  running.push(run);
  await run.waitForLog(/^could not record this process as a candidate: its role lacks privileges/);
  // Long before the 15 s a failing recording is waited for: the refusal is an answer.
  await expect
    .poll(async () => (await fetch(`http://127.0.0.1:${port}/readyz`)).status, { timeout: 5_000 })
    .toBe(200);
  await run.stop("SIGKILL");
  await owner.query(`DROP OWNED BY ${role}`);
  await owner.query(`DROP ROLE ${role}`);
});
