// A graceful stop's release picks the successor in SQL (src/postgres/statement-parts.ts,
// SUCCESSOR); `pglease handover` and the docs rank in TypeScript (rankCandidates(eligible(…)),
// src/candidacy/plan.ts). Two encodings of one ranking: held to the same choice here, on random
// candidate sets written to a real PostgreSQL, with the ties that separate them (start instants
// within one millisecond, holders that differ only by case or punctuation, the newest revision's
// own ties). And what the release keeps from before: the holder and fence check, a row without
// a live candidate left as it was, and a server's refusal falling back to a release to anyone.
import type pg from "pg";
import { afterAll, beforeAll, expect, it } from "vitest";
import { eligible, rankCandidates } from "../../src/candidacy/plan.ts";
import { CandidateStore } from "../../src/postgres/candidates.ts";
import { HandoverStore } from "../../src/postgres/handover.ts";
import { migrate } from "../../src/postgres/migrate.ts";
import { createLeasePool } from "../../src/postgres/pool.ts";
import { PgLeaseStore, releaseToSuccessors } from "../../src/postgres/store.ts";
import { Rng } from "../sim/prng.ts";
import { createTestDatabase, type TestDatabase } from "../support/postgres/database.ts";

const TIMEOUT_MS = 10_000;
const LEADER = "leader";
// Byte order and a locale's order disagree on these: case, punctuation, a non-ASCII letter.
const HOLDERS = ["a", "B", "b", "b-1", "b_1", "b1", "Z", "é", "aa", LEADER];
const REVISIONS = [null, "r1", "r2", "r3"];
// Offsets of started_at from one base, µs: several within one millisecond, some on its edges.
const STARTS_US = [0, 1, 400, 999, 1_000, 1_001, 1_999, 2_500, 7_000];

let db: TestDatabase;
let pool: pg.Pool;
let plain: PgLeaseStore;
let stopping: PgLeaseStore;
let candidates: CandidateStore;
let handovers: HandoverStore;
const refused: string[] = [];

beforeAll(async () => {
  db = await createTestDatabase();
  pool = createLeasePool({ connectionString: db.url, max: 4 });
  plain = new PgLeaseStore({ pool, statementTimeoutMs: TIMEOUT_MS });
  stopping = new PgLeaseStore({ pool, statementTimeoutMs: TIMEOUT_MS });
  releaseToSuccessors(stopping, { reservationMs: 60_000, onRefused: (e) => refused.push(e.message) });
  candidates = new CandidateStore(pool, plain.table, TIMEOUT_MS);
  handovers = new HandoverStore(pool, plain.table, TIMEOUT_MS);
  await migrate(pool, plain.table);
});

afterAll(async () => {
  await pool.end();
  await db.drop();
});

interface Drawn {
  holder: string;
  priority: number;
  revision: string | null;
  leads: boolean;
  startUs: number;
  live: boolean;
}

function drawCandidates(rng: Rng): Drawn[] {
  const holders = [...HOLDERS];
  for (let i = holders.length - 1; i > 0; i--) {
    const j = rng.int(0, i);
    [holders[i], holders[j]] = [holders[j] as string, holders[i] as string];
  }
  holders.length = rng.int(0, 7);
  return holders.map((holder) => ({
    holder,
    priority: rng.pick([0, 0, 0, 1, 1, 2, -1]),
    revision: rng.pick(REVISIONS),
    leads: rng.chance(0.85),
    startUs: rng.pick(STARTS_US),
    live: rng.chance(0.85),
  }));
}

/** Writes `key`'s candidates as announcements would have: started_at from one base, µs apart. */
async function seed(key: string, drawn: readonly Drawn[]): Promise<void> {
  await pool.query(
    `INSERT INTO ${plain.table.candidates} (key, holder, pod, priority, revision, leads, started_at, seen_at, seen_until)
     SELECT $1, d.holder, d.holder || '-pod', d.priority, d.revision, d.leads,
            timestamptz '2026-01-01 00:00:00.000+00' + d.start_us * interval '1 microsecond', clock_timestamp(),
            clock_timestamp() + CASE WHEN d.live THEN interval '1 hour' ELSE interval '-1 second' END
       FROM unnest($2::text[], $3::integer[], $4::text[], $5::boolean[], $6::bigint[], $7::boolean[])
            AS d(holder, priority, revision, leads, start_us, live)`,
    [
      key,
      drawn.map((d) => d.holder),
      drawn.map((d) => d.priority),
      drawn.map((d) => d.revision),
      drawn.map((d) => d.leads),
      drawn.map((d) => d.startUs),
      drawn.map((d) => d.live),
    ],
  );
}

async function held(key: string): Promise<number> {
  const claimed = await plain.claim(key, LEADER, 60_000);
  if (!claimed.won) throw new Error(`${key} not won`);
  return claimed.fence;
}

it("on random candidate sets, the release reserves for the candidate rankCandidates(eligible(…)) ranks first", async () => {
  const rng = Rng.stream(30, "successor-ranking");
  const decidedBy = new Set<string>();
  const terms: Array<{ key: string; fence: number }> = [];
  const expected = new Map<string, string | null>();
  for (let i = 0; i < 400; i++) {
    const key = `r${i}`;
    await seed(key, drawCandidates(rng));
    const ranked = rankCandidates(eligible(await candidates.list(key), LEADER));
    expected.set(key, ranked[0]?.holder ?? null);
    decidedBy.add(decider(ranked));
    terms.push({ key, fence: await held(key) });
  }
  // Half alone (the single release), half in one statement (close()'s releaseMany).
  const alone = terms.filter((_, i) => i % 2 === 0);
  for (const term of alone) expect(await stopping.release(term.key, LEADER, term.fence)).toBe(true);
  const together = terms.filter((_, i) => i % 2 === 1);
  expect((await stopping.releaseMany(LEADER, together)).size).toBe(together.length);
  for (const { key } of terms) {
    const row = await handovers.reservation(key);
    expect({ key, live: row?.live, reservedFor: row?.reservedFor }).toEqual({
      key,
      live: false,
      reservedFor: expected.get(key),
    });
  }
  // Every tie-break decided some set: the draw reaches each clause of both encodings.
  expect([...decidedBy].sort()).toEqual(["holder", "none", "one", "priority", "revision", "started"]);
  expect(refused).toEqual([]);
});

/** Which clause put the first ahead of the second. */
function decider(ranked: ReturnType<typeof rankCandidates>): string {
  const [a, b] = ranked;
  if (!a) return "none";
  if (!b) return "one";
  if (a.priority !== b.priority) return "priority";
  if (a.revision !== b.revision) return "revision";
  return a.startedAt.getTime() !== b.startedAt.getTime() ? "started" : "holder";
}

it("reserves only the term it releases: another holder's term, or an older fence, is neither released nor reserved", async () => {
  await seed("term", [{ holder: "a", priority: 0, revision: null, leads: true, startUs: 0, live: true }]);
  const fence = await held("term");
  expect(await stopping.release("term", "someone-else", fence)).toBe(false);
  expect(await stopping.release("term", LEADER, fence - 1)).toBe(false);
  expect((await stopping.releaseMany(LEADER, [{ key: "term", fence: fence - 1 }])).size).toBe(0);
  expect(await handovers.reservation("term")).toMatchObject({ live: true, reservedFor: null });
  expect(await stopping.release("term", LEADER, fence)).toBe(true);
  expect(await handovers.reservation("term")).toMatchObject({ live: false, reservedFor: "a" });
});

it("without a live candidate, the row's reservation stays as it was", async () => {
  await seed("none", [{ holder: "a", priority: 0, revision: null, leads: true, startUs: 0, live: false }]);
  const fence = await held("none");
  // A handover asked of this term (pglease handover --to b) before the stop.
  await handovers.reserve("none", fence, "b", 60_000);
  expect(await stopping.release("none", LEADER, fence)).toBe(true);
  expect(await handovers.reservation("none")).toMatchObject({ live: false, reservedFor: "b" });
});

it("a server that refuses the reservation's statement still gets the release, to anyone", async () => {
  await seed("refused", [{ holder: "a", priority: 0, revision: null, leads: true, startUs: 0, live: true }]);
  const [one, many] = [await held("refused"), await held("refused-many")];
  const table = plain.table.candidates;
  const hidden = `${table.slice(0, -1)}_hidden"`;
  await pool.query(`ALTER TABLE ${table} RENAME TO ${hidden.split(".")[1]}`);
  try {
    expect(await stopping.release("refused", LEADER, one)).toBe(true);
    expect(await stopping.releaseMany(LEADER, [{ key: "refused-many", fence: many }])).toEqual(
      new Map([["refused-many", many]]),
    );
  } finally {
    await pool.query(`ALTER TABLE ${hidden} RENAME TO ${table.split(".")[1]}`);
  }
  expect(await handovers.reservation("refused")).toMatchObject({ live: false, reservedFor: null });
  expect(refused.splice(0)).toEqual([
    expect.stringContaining("does not exist"),
    expect.stringContaining("does not exist"),
  ]);
});

it("never reserves for the releasing process's own predecessor, proven dead by the restart lock, while its row still looks live", async () => {
  // A container restarted in place: its new process took the lease over by the restart proof
  // (same lock, bound later), and the dead one's candidacy row stays live until its seen_until.
  const token = "0123456789abcdef0123456789abcdef";
  const [dead, self] = [`pod-a-1#r:${token}.100`, `pod-a-2#r:${token}.200`];
  // The dead process campaigned longest: by rank alone it would be first.
  const fences: number[] = [];
  for (const key of ["restarted", "restarted-many"]) {
    await seed(key, [
      { holder: dead, priority: 0, revision: "r1", leads: true, startUs: 0, live: true },
      { holder: "pod-b", priority: 0, revision: "r1", leads: true, startUs: 7_000, live: true },
    ]);
    const claimed = await plain.claim(key, self, 60_000);
    if (!claimed.won) throw new Error(`${key} not won`);
    fences.push(claimed.fence);
  }
  expect(await stopping.release("restarted", self, fences[0] as number)).toBe(true);
  expect(
    (await stopping.releaseMany(self, [{ key: "restarted-many", fence: fences[1] as number }])).size,
  ).toBe(1);
  for (const key of ["restarted", "restarted-many"]) {
    expect(await handovers.reservation(key)).toMatchObject({ live: false, reservedFor: "pod-b" });
  }
  // TypeScript's ranking (pglease handover's default target) agrees.
  const ranked = rankCandidates(eligible(await candidates.list("restarted"), self));
  expect(ranked.map((c) => c.holder)).toEqual(["pod-b"]);
});

it("never reserves for a candidate the kubelet reported terminated (crash takeover's witness), while its row still looks live", async () => {
  // The process of pod-c died: its row stays live until its seen_until, and ranked alone it is first.
  const witnessed = new PgLeaseStore({
    pool,
    statementTimeoutMs: TIMEOUT_MS,
    crashedHolders: () => ["pod-c"],
  });
  releaseToSuccessors(witnessed, { reservationMs: 60_000, onRefused: (e) => refused.push(e.message) });
  const fences: number[] = [];
  for (const key of ["crashed", "crashed-many"]) {
    await seed(key, [
      { holder: "pod-c", priority: 1, revision: null, leads: true, startUs: 0, live: true },
      { holder: "pod-b", priority: 0, revision: null, leads: true, startUs: 0, live: true },
    ]);
    fences.push(await held(key));
  }
  expect(await witnessed.release("crashed", LEADER, fences[0] as number)).toBe(true);
  expect(
    (await witnessed.releaseMany(LEADER, [{ key: "crashed-many", fence: fences[1] as number }])).size,
  ).toBe(1);
  for (const key of ["crashed", "crashed-many"]) {
    expect(await handovers.reservation(key)).toMatchObject({ live: false, reservedFor: "pod-b" });
  }
  expect(refused).toEqual([]);
});
