// The leader-only app container of a chaos replica: polls its sidecar's /status and, while the
// last answer says leader, writes as fast as it can with that answer's fence, each write one row
// (replica, fence, time) in chaos_writes inside the guard's transaction. When the sidecar does
// not answer, the last answer stands: the least cautious reading, so stale fences really reach
// the guard. A guard refusal is final for that fence (the README's rule) and is logged as a line.
// CHAOS_GUARD=off writes the same rows without the guard: the deliberately unsafe variant.
import { setTimeout as sleep } from "node:timers/promises";
import pg from "pg";
import { createFenceGuard, readStatusEndpoint, StaleFenceError } from "../../src/fence/index.ts";
import { ERROR_BACKOFF_MS, POLL_EVERY_MS, STATUS_TIMEOUT_MS, WRITE_TIMEOUT_MS } from "./workload-timing.ts";

// The row the checker reads in seq order. Under the guard, seq is drawn after the guard row's lock
// is taken, so seq order is the order in which the guarded transactions committed.
const INSERT_WRITE = "INSERT INTO chaos_writes (replica, fence, issued_ms) VALUES ($1, $2, $3)";

const env = (name: string): string => {
  const value = process.env[name];
  if (!value) throw new Error(`chaos workload: ${name} is required`);
  return value;
};

const statusUrl = env("CHAOS_STATUS_URL");
const replica = env("CHAOS_REPLICA");
const resource = env("CHAOS_RESOURCE");
const guarded = process.env.CHAOS_GUARD !== "off";

function logLine(fields: Record<string, unknown>): void {
  process.stdout.write(`${JSON.stringify({ time: Date.now(), replica, ...fields })}\n`);
}

const pool = new pg.Pool({
  connectionString: env("DATABASE_URL"),
  max: 2,
  connectionTimeoutMillis: WRITE_TIMEOUT_MS,
  query_timeout: WRITE_TIMEOUT_MS,
  // A writer frozen inside its transaction holds the guard row; the server ends that transaction
  // after a second so the next leader is not blocked behind it (the README's advice).
  options: `-c idle_in_transaction_session_timeout=${WRITE_TIMEOUT_MS} -c statement_timeout=${WRITE_TIMEOUT_MS}`,
});
pool.on("error", () => {});
const guard = createFenceGuard({ pool, lockTimeoutMs: WRITE_TIMEOUT_MS });

let reading: { role: "leader" | "follower"; fence: number | null } = { role: "follower", fence: null };
const refused = new Set<number>();
let lastError = "";

async function pollStatus(): Promise<never> {
  for (;;) {
    try {
      // The sidecar holds other leases too: this workload writes under its resource's alone.
      const next = await readStatusEndpoint(statusUrl, { lease: resource, timeoutMs: STATUS_TIMEOUT_MS });
      if (next.role !== reading.role || next.fence !== reading.fence) {
        logLine({ event: "reading", role: next.role, fence: next.fence });
      }
      reading = { role: next.role, fence: next.fence };
    } catch {
      // No answer is not a "no": keep the last reading.
    }
    await sleep(POLL_EVERY_MS);
  }
}

async function writeOnce(fence: number): Promise<void> {
  const values = [replica, fence, Date.now()];
  if (guarded) await guard.run(resource, fence, (client) => client.query(INSERT_WRITE, values));
  else await pool.query(INSERT_WRITE, values);
}

async function writeWhileLeading(): Promise<never> {
  for (;;) {
    const { role, fence } = reading;
    if (role !== "leader" || fence === null || refused.has(fence)) {
      await sleep(5);
      continue;
    }
    try {
      await writeOnce(fence);
      lastError = "";
    } catch (error) {
      if (error instanceof StaleFenceError) {
        refused.add(fence);
        logLine({ event: "rejected", fence, currentFence: error.currentFence });
        continue;
      }
      const message = error instanceof Error ? error.message : String(error);
      if (message !== lastError) logLine({ event: "write-error", fence, err: message });
      lastError = message;
      await sleep(ERROR_BACKOFF_MS);
    }
  }
}

// The chaos run holds our stdin open; its end means the run is gone.
process.stdin.on("end", () => process.exit(0));
process.stdin.resume();
logLine({ event: "started", guarded });
void pollStatus();
void writeWhileLeading();
