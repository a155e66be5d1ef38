// A leader-only reconciler next to the pglease sidecar. It asks who leads (the sidecar's /status,
// or the downward API folder), does its work only while this pod leads, and writes every change
// through the fence guard, so a paused pod that wakes up still believing it leads cannot write.
//
//   DATABASE_URL=postgres://... LEADER_STATUS_URL=http://127.0.0.1:8484/status \
//     node deploy/examples/fenced-reconciler/main.ts
import { setTimeout as sleep } from "node:timers/promises";
import pg from "pg";
import {
  createFenceGuard,
  type LeadershipReading,
  readStatusEndpoint,
  StaleFenceError,
  watchDownwardApi,
} from "../../../src/index.ts";

const env = readEnv();
const pool = new pg.Pool({ connectionString: env.databaseUrl, max: 2 });
// Idle clients can lose their server (failover, restart); the pool replaces them on next use.
pool.on("error", (error) => log("idle database connection lost", { error: error.message }));
const guard = createFenceGuard({ pool, lockTimeoutMs: 5000 });
const stop = new AbortController();
for (const signal of ["SIGTERM", "SIGINT"] as const) process.once(signal, () => stop.abort());

// The work this reconciler owns: one summary row per resource. Stands in for any table the leader writes.
const CREATE_STATE_TABLE = `CREATE TABLE IF NOT EXISTS fenced_reconciler_state (
  resource TEXT PRIMARY KEY, fence BIGINT NOT NULL, runs BIGINT NOT NULL, reconciled_at TIMESTAMPTZ NOT NULL)`;
// Runs inside the guard's transaction: it commits only if the guard row accepted this fence.
const RECORD_RUN = `INSERT INTO fenced_reconciler_state (resource, fence, runs, reconciled_at)
  VALUES ($1, $2, 1, clock_timestamp())
  ON CONFLICT (resource) DO UPDATE SET fence = EXCLUDED.fence, runs = fenced_reconciler_state.runs + 1,
    reconciled_at = EXCLUDED.reconciled_at
  RETURNING runs`;

await guard.migrate();
await pool.query(CREATE_STATE_TABLE);
const leadership = await leadershipSource();
log("started", { source: env.source, resource: env.resource });

let refusedUpTo = 0;
while (!stop.signal.aborted) {
  try {
    const reading = await leadership.read();
    if (reading.role !== "leader" || reading.fence === null) {
      log("follower: not reconciling", { fence: reading.fence });
    } else if (reading.fence <= refusedUpTo) {
      log("stale fence: waiting for a new term", { fence: reading.fence, refusedUpTo });
    } else {
      const fence = reading.fence;
      const runs = await guard.run(env.resource, fence, async (client) => {
        const { rows } = await client.query(RECORD_RUN, [env.resource, fence]);
        return Number(rows[0].runs);
      });
      log("wrote", { fence, runs });
    }
  } catch (error) {
    if (error instanceof StaleFenceError) {
      // A newer leader has written: this pod's belief is out of date, whatever its source says.
      refusedUpTo = error.fence;
      log("refused", { fence: error.fence, currentFence: error.currentFence });
    } else {
      log("reconcile failed", { error: (error as Error).message });
    }
  }
  await sleep(env.intervalMs, undefined, { signal: stop.signal }).catch(() => {});
}

leadership.close();
await pool.end();
log("stopped");

interface Leadership {
  read(): Promise<LeadershipReading>;
  close(): void;
}

async function leadershipSource(): Promise<Leadership> {
  if (env.source === "status") {
    const url = env.statusUrl as string;
    return { read: () => readStatusEndpoint(url, { lease: env.lease }), close() {} };
  }
  // The folder is watched, so each tick uses the latest generation the kubelet has written.
  let latest: LeadershipReading = { role: "follower", lease: null, fence: null, source: "downward-api" };
  const watch = watchDownwardApi(
    env.infoDir as string,
    { onError: (error) => log("pod info unreadable", { error: error.message }) },
    (reading) => {
      latest = reading;
      log("pod info changed", { role: reading.role, fence: reading.fence });
    },
  );
  return { read: async () => latest, close: () => watch.close() };
}

function readEnv() {
  const databaseUrl = process.env.DATABASE_URL;
  const statusUrl = process.env.LEADER_STATUS_URL;
  const infoDir = process.env.LEADER_INFO_DIR;
  const source = process.env.FENCE_SOURCE ?? (statusUrl ? "status" : "downward-api");
  const intervalMs = Number(process.env.RECONCILE_INTERVAL_MS ?? 5000);
  const problems = [
    !databaseUrl && "DATABASE_URL is required (postgres://user:password@host/db)",
    source !== "status" && source !== "downward-api" && `FENCE_SOURCE must be "status" or "downward-api"`,
    source === "status" && !statusUrl && "LEADER_STATUS_URL is required with FENCE_SOURCE=status",
    source === "downward-api" && !infoDir && "LEADER_INFO_DIR is required with FENCE_SOURCE=downward-api",
    !(Number.isInteger(intervalMs) && intervalMs > 0) && "RECONCILE_INTERVAL_MS must be a positive integer",
  ].filter(Boolean);
  if (problems.length > 0) {
    console.error(`fenced-reconciler: ${problems.join("; ")}`);
    process.exit(2);
  }
  return {
    databaseUrl,
    source,
    statusUrl,
    infoDir,
    lease: process.env.LEASE_NAME || undefined,
    resource: process.env.RESOURCE ?? "orders-sync",
    intervalMs,
  };
}

function log(message: string, fields: Record<string, unknown> = {}): void {
  console.log(JSON.stringify({ time: new Date().toISOString(), message, ...fields }));
}
