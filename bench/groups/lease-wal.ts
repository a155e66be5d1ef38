// WAL written per statement: the probe reads the server's WAL insert position before and after
// one statement, on its own connection, with nothing else running in the bench.
import type pg from "pg";
import { createLeasePool } from "../../src/postgres/pool.ts";
import { PgLeaseStore } from "../../src/postgres/store.ts";
import type { BenchContext } from "../group.ts";
import type { Steps } from "../measure.ts";
import * as work from "./lease-workloads.ts";

// pg_current_wal_insert_lsn() is a read of shared memory: probing it writes nothing itself.
const WAL_POSITION = "SELECT pg_current_wal_insert_lsn()::text AS lsn";

function lsnBytes(lsn: string): bigint {
  const [high = "0", low = "0"] = lsn.split("/");
  return (BigInt(`0x${high}`) << 32n) + BigInt(`0x${low}`);
}

async function walPosition(probe: pg.Client): Promise<bigint> {
  const { rows } = await probe.query<{ lsn: string }>(WAL_POSITION);
  return lsnBytes(rows[0]?.lsn ?? "0/0");
}

/**
 * WAL bytes one run of `measured` writes, averaged over up to `runs` sequential runs (at least one,
 * then as many as fit in maxMs); `before` and `after` (a claim before its release) run unprobed.
 * The position is server-wide, so other databases' writes add noise.
 */
export async function walBytesPerRun(
  probe: pg.Client,
  runs: number,
  maxMs: number,
  measured: () => Promise<unknown>,
  around: { before?: () => Promise<unknown>; after?: () => Promise<unknown> } = {},
): Promise<number> {
  let total = 0n;
  let done = 0;
  const deadline = performance.now() + maxMs;
  for (; done < runs && (done === 0 || performance.now() < deadline); done++) {
    await around.before?.();
    const start = await walPosition(probe);
    await measured();
    total += (await walPosition(probe)) - start;
    await around.after?.();
  }
  return Number(total) / done;
}

export async function measureWal(
  context: BenchContext,
  table: string,
  statementTimeoutMs: number,
): Promise<Record<string, number>> {
  const runs = Math.max(1, Math.min(200, Math.ceil(context.budget.iterations / 4)));
  const pool = createLeasePool({
    connectionString: context.databaseUrl,
    max: 1,
    applicationName: "pglease-bench",
  });
  const clients: pg.Client[] = [];
  try {
    for (let i = 0; i < 3; i++) clients.push(await work.connect(context.databaseUrl));
    const [probe, pinned, otherSession] = [work.nth(clients, 0), work.nth(clients, 1), work.nth(clients, 2)];
    const store = new PgLeaseStore({ pool, table, statementTimeoutMs });
    const fence = await work.hold(store, "wal-renew", work.HOLDER);
    await work.hold(store, "wal-held", work.OTHER_HOLDER);
    await work.lockFromAnotherSession(otherSession, 0x626e6400);
    const cycle = work.claimReleaseCycle(store, "wal-cycle");
    const lockCycle = work.advisoryCycle(pinned, 0x626e6401);
    const [claim, release] = [work.stepOf(cycle, "claim"), work.stepOf(cycle, "release")];
    const [tryLock, unlock] = [work.stepOf(lockCycle, "try-lock"), work.stepOf(lockCycle, "unlock")];
    const only = (steps: Steps) => work.nth(steps, 0)[1];
    const maxMs = context.budget.maxMsPerFigure / 8;
    const wal = (measured: () => Promise<unknown>, around?: Parameters<typeof walBytesPerRun>[4]) =>
      walBytesPerRun(probe, runs, maxMs, measured, around);
    return {
      claim: await wal(claim, { after: release }),
      release: await wal(release, { before: claim }),
      renew: await wal(only(work.renewLoop(store, "wal-renew", fence))),
      read: await wal(only(work.readLoop(store, "wal-held"))),
      "failed claim": await wal(only(work.failedClaimLoop(store, "wal-held"))),
      "try-lock": await wal(tryLock, { after: unlock }),
      unlock: await wal(unlock, { before: tryLock }),
      "failed try-lock": await wal(only(work.failedTryLockLoop(pinned, 0x626e6400))),
    };
  } finally {
    await pool.end();
    await Promise.all(clients.map((client) => client.end()));
  }
}
