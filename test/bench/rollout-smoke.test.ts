// The rollout group with one rollout and two handovers against the test database: the figures
// have the promised shape and every process and server it started is gone. No timing assertions.
import { afterAll, beforeAll, expect, it } from "vitest";
import type { Budget } from "../../bench/group.ts";
import { QUICK_BUDGET } from "../../bench/group.ts";
import { runRollout } from "../../bench/groups/rollout.ts";
import { liveCandidates } from "../../bench/peers/candidates.ts";
import { stopKubeFixtures } from "../../bench/peers/kube-fixture.ts";
import { createTestDatabase, type TestDatabase } from "../support/postgres/database.ts";

const TINY: Budget = {
  ...QUICK_BUDGET,
  peerTiming: {
    name: "tiny (lease 2 s, renew deadline 1.5 s, retry 300 ms)",
    leaseMs: 2_000,
    renewDeadlineMs: 1_500,
    retryMs: 300,
  },
  gracefulTrials: 1,
};

let db: TestDatabase;
beforeAll(async () => {
  db = await createTestDatabase();
});
afterAll(async () => {
  await stopKubeFixtures();
  await db?.drop();
});

it("rolls the Deployment once per system and times two handovers", { timeout: 240_000 }, async () => {
  const result = await runRollout({
    databaseUrl: db.url,
    budget: TINY,
    signal: new AbortController().signal,
    progress: () => {},
  });
  expect(result.group).toBe("rollout");
  const { rollouts, handover, deployment } = result.figures;
  expect(deployment).toEqual({ replicas: 3, maxSurge: 1, maxUnavailable: 0 });
  const systems = result.figures.kube.clientGo ? ["pglease", "client-go-release"] : ["pglease"];
  expect(rollouts.map((s) => s.system)).toEqual(systems);
  for (const series of rollouts) {
    expect(series.trials).toHaveLength(1);
    expect(series.trials[0]?.leaders[0]).toBe("old");
    expect(series.trials[0]?.leaders.at(-1)).toBe("new");
    expect(series.changes.max).toBeGreaterThanOrEqual(1);
  }
  expect(handover[0]?.toLabelled?.samples).toBe(2);
  expect(handover[0]?.toLabelled?.p50Ms).toBeGreaterThan(0);
  expect(handover[1]?.toLabelled).toBeNull();
  expect(result.tables.map((t) => t.rows.length)).toEqual([systems.length, 2]);
  expect(liveCandidates()).toBe(0);
});
