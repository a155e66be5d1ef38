// Twenty writers with mixed fences race on one resource. Whatever the interleaving, the accepted
// writes in commit order never go back to a lower fence, and once the highest fence has committed,
// every attempt from a lower fence that starts afterwards is refused.
import { beforeAll, expect, it } from "vitest";
import { createFenceGuard, type FenceGuard, StaleFenceError } from "../../src/fence/index.ts";
import { usePoolFixture } from "./pool-fixture.ts";

const WRITERS = 20;
const ATTEMPTS_PER_WRITER = 4;
const fx = usePoolFixture(WRITERS + 2);
let guard: FenceGuard;

beforeAll(async () => {
  guard = createFenceGuard({ pool: fx.pool });
  await guard.migrate();
  // One sequence orders both events inside transactions and moments outside them: nextval is not
  // transactional, so its order is real time order across every session.
  await fx.pool.query(`
    CREATE SEQUENCE moments;
    CREATE TABLE writes (
      seq bigint PRIMARY KEY, writer int NOT NULL, fence bigint NOT NULL,
      started_at timestamptz NOT NULL, finished_at timestamptz NOT NULL)`);
});

interface Attempt {
  writer: number;
  fence: number;
  startedAt: number;
  outcome: { accepted: true; committedBefore: number } | { accepted: false; currentFence: number };
}

async function moment(): Promise<number> {
  const { rows } = await fx.pool.query("SELECT nextval('moments')::int AS m");
  return rows[0].m;
}

async function writer(index: number, fence: number): Promise<Attempt[]> {
  const attempts: Attempt[] = [];
  for (let i = 0; i < ATTEMPTS_PER_WRITER; i++) {
    const startedAt = await moment();
    try {
      await guard.run("orders", fence, async (client) => {
        // Taken after the guard row lock, so seq order is lock order, which is commit order.
        await client.query(
          `WITH m AS (SELECT nextval('moments') AS seq, clock_timestamp() AS started_at)
           INSERT INTO writes SELECT m.seq, $1, $2, m.started_at, clock_timestamp() FROM m`,
          [index, fence],
        );
      });
      attempts.push({
        writer: index,
        fence,
        startedAt,
        outcome: { accepted: true, committedBefore: await moment() },
      });
    } catch (error) {
      if (!(error instanceof StaleFenceError)) throw error;
      attempts.push({
        writer: index,
        fence,
        startedAt,
        outcome: { accepted: false, currentFence: error.currentFence },
      });
    }
  }
  return attempts;
}

it("never lets a lower fence land after a higher one, under contention", async () => {
  const fences = Array.from({ length: WRITERS }, (_, i) => ((i * 7) % 5) + 1);
  const highest = Math.max(...fences);
  const attempts = (await Promise.all(fences.map((fence, i) => writer(i, fence)))).flat();

  const { rows } = await fx.pool.query(
    "SELECT seq::int, writer, fence::int, started_at, finished_at FROM writes ORDER BY seq",
  );
  const accepted = attempts.filter((a) => a.outcome.accepted);
  const rejected = attempts.filter((a) => !a.outcome.accepted);
  expect(rows).toHaveLength(accepted.length);
  expect(accepted.length + rejected.length).toBe(WRITERS * ATTEMPTS_PER_WRITER);

  // Commit order never goes back to a lower fence.
  const committedFences = rows.map((r) => r.fence);
  expect(committedFences).toEqual([...committedFences].sort((a, b) => a - b));
  // The guard row serialized the transactions: no two accepted writes overlapped in time.
  for (let i = 1; i < rows.length; i++) {
    expect(rows[i].started_at.getTime()).toBeGreaterThanOrEqual(rows[i - 1].finished_at.getTime());
  }

  // Every refusal names a fence the resource had really accepted, higher than the writer's.
  for (const a of rejected) {
    if (a.outcome.accepted) continue;
    expect(a.outcome.currentFence).toBeGreaterThan(a.fence);
    expect(committedFences).toContain(a.outcome.currentFence);
  }

  // Once the highest fence has committed, every lower attempt that starts afterwards is refused.
  const firstHighestCommit = Math.min(
    ...accepted.flatMap((a) =>
      a.outcome.accepted && a.fence === highest ? [a.outcome.committedBefore] : [],
    ),
  );
  const lowerAfterHighest = attempts.filter((a) => a.fence < highest && a.startedAt > firstHighestCommit);
  expect(lowerAfterHighest.length).toBeGreaterThan(0);
  expect(lowerAfterHighest.filter((a) => a.outcome.accepted)).toEqual([]);

  expect(rejected.length).toBeGreaterThan(0);
  expect(accepted.filter((a) => a.fence === highest)).toHaveLength(
    fences.filter((f) => f === highest).length * 4,
  );
  expect(await guard.current("orders")).toBe(highest);
});
