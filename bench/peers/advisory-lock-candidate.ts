// The other usual alternative, for the bench: a PostgreSQL session advisory lock on a pinned
// connection. Each candidate is its own process with one connection of its own, trying
// pg_try_advisory_lock every retry period; the holder keeps the connection (and so the lock)
// until it stops. When a holder dies, the server ends its session and the lock goes with it.
//
//   DATABASE_URL=… node bench/peers/advisory-lock-candidate.ts --key 42 [--retry-period 2000]
//
// One JSON line per event on stdout: started, acquired (with the server's clock), released, lost.
// SIGTERM unlocks and exits; SIGKILL is a crash.
import { setTimeout as sleep } from "node:timers/promises";
import { parseArgs } from "node:util";
import pg from "pg";

// The server's clock in the same round trip as the lock, so the bench times the take on it.
const TRY_LOCK = {
  name: "bench-try-advisory-lock",
  // Session scope: the lock belongs to this connection until unlocked or until the session ends.
  text: "SELECT pg_try_advisory_lock($1::bigint) AS locked, (extract(epoch FROM clock_timestamp()) * 1000)::float8 AS at_ms",
};
// Released by the same session that took it: the only one that can.
const UNLOCK = { name: "bench-advisory-unlock", text: "SELECT pg_advisory_unlock($1::bigint) AS unlocked" };

function log(event: string, fields: Record<string, unknown> = {}): void {
  process.stdout.write(`${JSON.stringify({ event, ...fields })}\n`);
}

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: { key: { type: "string" }, "retry-period": { type: "string", default: "2000" } },
    strict: true,
  });
  const key = values.key;
  const retryPeriodMs = Number(values["retry-period"]);
  if (!key || !/^-?\d+$/.test(key)) throw new Error("--key: give the lock's number, e.g. 42");
  if (!Number.isFinite(retryPeriodMs) || retryPeriodMs <= 0)
    throw new Error("--retry-period: give milliseconds");
  const stopping = new AbortController();
  process.once("SIGTERM", () => stopping.abort());
  process.once("SIGINT", () => stopping.abort());

  const client = new pg.Client({
    connectionString: process.env.DATABASE_URL,
    application_name: "bench-advisory",
  });
  // A lost connection is a lost lock, and nothing else tells the holder.
  client.on("error", (error) => {
    log("lost", { reason: error.message });
    process.exit(1);
  });
  await client.connect();
  log("started", { key });
  let held = false;
  while (!stopping.signal.aborted) {
    const { rows } = await client.query<{ locked: boolean; at_ms: number }>({ ...TRY_LOCK, values: [key] });
    const row = rows[0];
    if (row?.locked) {
      held = true;
      log("acquired", { serverAtMs: row.at_ms });
      break;
    }
    await sleep(retryPeriodMs, undefined, { signal: stopping.signal }).catch(() => {});
  }
  if (held)
    await new Promise((resolve) => stopping.signal.addEventListener("abort", resolve, { once: true }));
  if (held) {
    await client.query({ ...UNLOCK, values: [key] });
    log("released");
  }
  await client.end();
}

main().then(
  () => process.exit(0),
  (error: unknown) => {
    process.stderr.write(
      `advisory-lock candidate: ${error instanceof Error ? error.message : String(error)}\n`,
    );
    process.exit(2);
  },
);
