// Small scenarios run on the model's server alone, for the differential test to hold against
// the same scenario on a real PostgreSQL.
import { EventLoop } from "./event-loop.ts";
import type { Semantics } from "./lease-statements.ts";
import { Rng } from "./prng.ts";
import { Server } from "./server.ts";

/**
 * Another session holds an expired lease row FOR UPDATE for 300 ms; a claim arrives 1 ms in and
 * its client gives up after 50 ms. Does the claim take the lease once the lock is gone?
 */
export async function lockedRowOutcome(
  sem: Semantics,
  statementTimeoutMs: number | null,
): Promise<{ tookLease: boolean }> {
  const loop = new EventLoop(new Rng(1));
  const server = new Server(
    loop,
    new Rng(2),
    { sem, statementTimeoutMs },
    {
      committed() {},
      finished() {},
      notify() {},
    },
  );
  server.rows.set("k", { key: "k", holder: "h1", fence: 1, acquiredAt: -2_000, expiresAt: -1_000, tuple: 1 });
  loop.at(0, null, () => server.holdRowLock("k", 300_000));
  loop.at(1_000, null, () =>
    server.submit(
      { kind: "claim", key: "k", holder: "h2", durationMs: 60_000 },
      "client",
      {
        sentUs: 1_000,
        deadlineUs: 51_000,
      },
      () => {},
    ),
  );
  await loop.run(1_000_000, () => {});
  return { tookLease: server.rows.get("k")?.holder === "h2" };
}
