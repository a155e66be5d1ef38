// The handover's SQL on a real PostgreSQL: the reservation one statement writes, the claim clause
// that lets only the named candidate in until it passes, the history's `handover`, and the
// candidates table (live by the server's clock, rows of long-gone processes removed).
import type pg from "pg";
import { afterAll, beforeAll, expect, it } from "vitest";
import type { ClaimAnswer } from "../../src/election/ports.ts";
import { CandidateStore } from "../../src/postgres/candidates.ts";
import { HandoverStore } from "../../src/postgres/handover.ts";
import { createRecordFunction } from "../../src/postgres/history.ts";
import { readHistory } from "../../src/postgres/history-store.ts";
import { assertTablePresent, LeaseTableMissingError, migrate } from "../../src/postgres/migrate.ts";
import { createLeasePool } from "../../src/postgres/pool.ts";
import { PgLeaseStore } from "../../src/postgres/store.ts";
import { leaseTable } from "../../src/postgres/table.ts";
import { createTestDatabase, type TestDatabase } from "../support/postgres/database.ts";

let db: TestDatabase;
let pool: pg.Pool;
let store: PgLeaseStore;
let handovers: HandoverStore;
let candidates: CandidateStore;

beforeAll(async () => {
  db = await createTestDatabase();
  pool = createLeasePool({ connectionString: db.url, max: 4, onIdleError: () => {} });
  store = new PgLeaseStore({ pool, statementTimeoutMs: 5_000 });
  await migrate(pool, store.table);
  handovers = new HandoverStore(pool, store.table, 5_000);
  candidates = new CandidateStore(pool, store.table, 5_000);
});
afterAll(async () => {
  await pool.end();
  await db.drop();
});

function won(answer: ClaimAnswer) {
  if (!answer.won) throw new Error(`expected to win, ${answer.holder} holds it`);
  return answer;
}

it("a reservation lets only the named candidate claim until it passes; its claim is recorded as a handover", async () => {
  const a = won(await store.claim("k", "a", 60_000));
  expect(await handovers.reserve("k", a.fence, "b", 30_000)).toMatchObject({
    holder: "a",
    fence: a.fence,
    reservedFor: "b",
  });
  // Reserved, but still a's live term: nobody takes it, the named candidate included.
  expect((await store.claim("k", "b", 60_000)).won).toBe(false);
  expect(await store.release("k", "a", a.fence)).toBe(true);
  // Free now, but reserved: c is refused and told to look again when the reservation passes, not at once.
  const refused = await store.claim("k", "c", 60_000);
  expect(refused).toMatchObject({ won: false, holder: "a" });
  expect(refused.ttlMs).toBeGreaterThan(25_000);
  // The holder that handed over is refused too.
  expect((await store.claim("k", "a", 60_000)).won).toBe(false);
  const b = won(await store.claim("k", "b", 60_000));
  expect(b.change).toEqual({ reason: "handover", previousHolder: "a" });
  expect(await handovers.reservation("k")).toMatchObject({ holder: "b", live: true, reservedFor: null });
  const entries = await readHistory(pool, store.table, { key: "k", limit: 10 });
  expect(entries.map((e) => e.reason)).toEqual(["claim", "release", "handover"]);
});

it("a named candidate that never claims leaves the lease to anyone once the reservation passes", async () => {
  const a = won(await store.claim("dead-target", "a", 60_000));
  await handovers.reserve("dead-target", a.fence, "gone", 1);
  await store.release("dead-target", "a", a.fence);
  await pool.query("SELECT pg_sleep(0.005)");
  const c = won(await store.claim("dead-target", "c", 60_000));
  expect(c.change?.reason).toBe("claim");
});

it("a handover is written only for the live term the caller saw, to another holder", async () => {
  const a = won(await store.claim("term", "a", 60_000));
  expect(await handovers.reserve("term", a.fence + 1, "b", 10_000)).toBeNull();
  expect(await handovers.reserve("term", a.fence, "a", 10_000)).toBeNull();
  await store.release("term", "a", a.fence);
  expect(await handovers.reserve("term", a.fence, "b", 10_000)).toBeNull();
  expect(await handovers.reservation("term")).toMatchObject({ live: false, reservedFor: null });
  await expect(handovers.reserve("term", a.fence, "b", 0)).rejects.toThrow(/positive whole number/);
});

it("candidates: one statement announces every key, liveness is the server's, gone processes drop out", async () => {
  const entry = (key: string, priority = 0) => ({ key, pod: "pod-1", priority, revision: "r1", leads: true });
  await candidates.announce("h1", [entry("c1", 5), entry("c2")], 60_000);
  await candidates.announce("h2", [{ ...entry("c1"), pod: "pod-2", leads: false }], 1);
  await pool.query("SELECT pg_sleep(0.005)");
  const listed = await candidates.list("c1");
  expect(listed.map((c) => [c.holder, c.pod, c.priority, c.leads, c.live])).toEqual([
    ["h1", "pod-1", 5, true, true],
    ["h2", "pod-2", 0, false, false],
  ]);
  const startedAt = listed[0]?.startedAt;
  // A refresh keeps when it began campaigning.
  await candidates.announce("h1", [entry("c1", 7)], 60_000);
  const refreshed = (await candidates.list("c1"))[0];
  expect(refreshed?.priority).toBe(7);
  expect(refreshed?.startedAt).toEqual(startedAt);
  // Long gone (an hour past its liveness): the next announcement of the key removes it.
  await pool.query(
    `UPDATE ${store.table.candidates} SET seen_until = clock_timestamp() - interval '2 hours' WHERE holder = 'h2'`,
  );
  await candidates.announce("h1", [entry("c1", 7)], 60_000);
  expect((await candidates.list("c1")).map((c) => c.holder)).toEqual(["h1"]);
  await candidates.withdraw("h1", ["c1", "c2"]);
  expect(await candidates.list()).toEqual([]);
});

it("a table made before handovers gets the reservation columns and the trigger that names a handover", async () => {
  const owner = createLeasePool({ connectionString: db.url, max: 1, onIdleError: () => {} });
  const table = leaseTable("before_handover", "leases");
  try {
    await migrate(owner, table);
    await owner.query(
      "ALTER TABLE before_handover.leases DROP COLUMN reserved_for, DROP COLUMN reserved_until",
    );
    await owner.query(`DROP TABLE ${table.candidates}`);
    // The trigger function as pglease wrote it before: no word for a handover.
    const before = createRecordFunction(table).replace(
      /-- The named candidate[^\n]*\n[^\n]*'handover'\n/,
      "",
    );
    expect(before).not.toContain("'handover'");
    await owner.query(before);
    await expect(assertTablePresent(owner, table)).rejects.toThrow(LeaseTableMissingError);
    await migrate(owner, table);
    await assertTablePresent(owner, table);
    const old = new PgLeaseStore({
      pool: owner,
      schema: "before_handover",
      table: "leases",
      statementTimeoutMs: 5_000,
    });
    const a = won(await old.claim("k", "a", 60_000));
    await new HandoverStore(owner, table, 5_000).reserve("k", a.fence, "b", 10_000);
    await old.release("k", "a", a.fence);
    expect(won(await old.claim("k", "b", 60_000)).change?.reason).toBe("handover");
  } finally {
    await owner.end();
  }
});
