// Small scenarios run on the model's server alone, for the differential test to hold against
// the same scenario on a real PostgreSQL.
import { EventLoop } from "./event-loop.ts";
import type { Semantics } from "./lease-statements.ts";
import { Rng } from "./prng.ts";
import type { Request } from "./requests.ts";
import { Server } from "./server.ts";

function modelServer(sem: Semantics, statementTimeoutMs: number | null): { loop: EventLoop; server: Server } {
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
  return { loop, server };
}

/**
 * Another session holds an expired lease row FOR UPDATE for 300 ms; a claim arrives 1 ms in and
 * its client gives up after 50 ms. Does the claim take the lease once the lock is gone?
 */
export async function lockedRowOutcome(
  sem: Semantics,
  statementTimeoutMs: number | null,
): Promise<{ tookLease: boolean }> {
  const { loop, server } = modelServer(sem, statementTimeoutMs);
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

/**
 * h1's lease (fence 1) runs out 200 ms in; from 0 another session holds its row for 400 ms, by a
 * SELECT … FOR UPDATE ("lock") or an UPDATE that changes no value ("update"). h1's renew or
 * release arrives 1 ms in, live by its start clock. Does it renew (release) once the lock goes?
 */
export async function queuedOnExpiringRow(
  sem: Semantics,
  blocker: "lock" | "update",
  kind: "renew" | "release",
): Promise<{ matched: boolean }> {
  const { loop, server } = modelServer(sem, null);
  server.rows.set("k", {
    key: "k",
    holder: "h1",
    fence: 1,
    acquiredAt: -1_000,
    expiresAt: 200_000,
    tuple: 1,
  });
  const request: Request =
    kind === "renew"
      ? { kind, key: "k", holder: "h1", fence: 1, durationMs: 60_000 }
      : { kind, key: "k", holder: "h1", fence: 1 };
  let matched = false;
  loop.at(0, null, () => server.holdRowLock("k", 400_000, blocker === "update"));
  loop.at(1_000, null, () =>
    server.submit(request, "client", { sentUs: 1_000, deadlineUs: 10_000_000 }, (reply) => {
      const answer = "answer" in reply ? reply.answer : null;
      matched = answer === true || (answer as { renewed?: boolean } | null)?.renewed === true;
    }),
  );
  await loop.run(1_000_000, () => {});
  return { matched };
}

/**
 * h1 claims k for 1 ms; from 2 ms another session holds k's row FOR UPDATE for 300 ms; h2's claim
 * of k arrives at 3 ms and waits; at 100 ms h3 claims k2, which nobody holds. Is h2's fence below
 * h3's, though h2 commits after it (a fence drawn when the claim started)?
 */
export async function queuedClaimFence(sem: Semantics): Promise<{ belowLaterWin: boolean }> {
  const { loop, server } = modelServer(sem, null);
  const fences = new Map<string, number>();
  const claim = (atUs: number, key: string, holder: string, durationMs: number) =>
    loop.at(atUs, null, () =>
      server.submit(
        { kind: "claim", key, holder, durationMs },
        "client",
        { sentUs: atUs, deadlineUs: 10_000_000 },
        (reply) => {
          const answer = "answer" in reply ? (reply.answer as { won: boolean; fence: number }) : null;
          if (answer?.won) fences.set(holder, answer.fence);
        },
      ),
    );
  claim(0, "k", "h1", 1);
  loop.at(2_000, null, () => server.holdRowLock("k", 300_000));
  claim(3_000, "k", "h2", 60_000);
  claim(100_000, "k2", "h3", 60_000);
  await loop.run(1_000_000, () => {});
  return { belowLaterWin: (fences.get("h2") ?? 0) < (fences.get("h3") ?? 0) };
}
