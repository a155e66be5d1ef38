// leader-session-kill (--session-takeover): pg_terminate_backend of the session the leader recorded
// with its term, read from the lease row, while its process lives: as an operator, an
// idle_session_timeout or the server's keepalive would end it. A follower may then take the term
// over before the leader hears of it: the README's window. Variants: the leader running; the
// leader's pod or sidecar SIGSTOPped first, so it cannot hear of it, and continued later; the
// leader's renew queued on the lease row's lock, so the kill lands while that renew is in flight.
// leader-session-stall: that session's backend SIGSTOPped instead (issue 27): the holder gives
// the session up once its ping times out, while the server still lists it; continued, the backend
// reads the closed socket and exits, and a follower may take the term. Not the README's window:
// the holder must have stopped believing before then.
import { setTimeout as sleep } from "node:timers/promises";
import pg from "pg";
import { leaseTable } from "../../src/postgres/index.ts";
import type { ChaosCluster } from "./cluster.ts";
import type { Active } from "./db-faults.ts";
import type { InjectedFault, SessionEnd } from "./history.ts";
import type { PlannedFault } from "./schedule.ts";

type Base = Pick<InjectedFault, "kind" | "target" | "startedAt">;

const TABLE = leaseTable();

// Only a session recorded by the live term itself (session_fence = fence) can be taken over.
const RECORDED_SESSION = `SELECT holder, fence::text, session_pid AS pid, session_started_at::text AS started
  FROM ${TABLE.qualified} WHERE key = $1 AND session_fence = fence AND session_pid IS NOT NULL
    AND expires_at > clock_timestamp()`;
// The recorded backend and no other (a pid reused since is left alone); with a timeout the
// answer comes once the backend has exited, so the answer bounds the session's end.
const KILL = `SELECT pg_terminate_backend(pid, 1000) AS ended FROM pg_stat_activity
  WHERE pid = $1 AND backend_start = $2::timestamptz`;
// FOR UPDATE: the leader's next renew queues behind it (followers only read until a term is free).
const LOCK_ROW = `SELECT 1 FROM ${TABLE.qualified} WHERE key = $1 FOR UPDATE`;
const LOCK_WAITERS = `SELECT count(*)::int AS n FROM pg_stat_activity
  WHERE datname = current_database() AND wait_event_type = 'Lock' AND pid <> pg_backend_pid()`;
/** A renew comes every renew interval; this is two of them, with room for a loaded host. */
const RENEW_WAIT_MS = 1_500;

interface Recorded {
  holder: string;
  fence: string;
  pid: number;
  started: string;
}

async function session(url: string): Promise<pg.Client> {
  const client = new pg.Client({ connectionString: url });
  client.on("error", () => {});
  await client.connect();
  return client;
}

async function kill(client: pg.Client, recorded: Recorded): Promise<SessionEnd | null> {
  const from = Date.now();
  const { rows } = await client.query<{ ended: boolean }>(KILL, [recorded.pid, recorded.started]);
  if (rows[0]?.ended !== true) return null;
  return { holder: recorded.holder, fence: Number(recorded.fence), from, to: Date.now() };
}

/** Holds the row lock until a statement queues behind it (the leader's renew), then kills. */
async function killWhileRenewQueued(client: pg.Client, key: string, recorded: Recorded) {
  await client.query("BEGIN");
  try {
    await client.query(LOCK_ROW, [key]);
    const deadline = Date.now() + RENEW_WAIT_MS;
    let waiting = 0;
    while (waiting === 0 && Date.now() < deadline) {
      await sleep(5);
      waiting = (await client.query<{ n: number }>(LOCK_WAITERS)).rows[0]?.n ?? 0;
    }
    return { ended: await kill(client, recorded), waiting };
  } finally {
    await client.query("COMMIT");
  }
}

/** The live term's recorded session and the replica that holds it, or null. */
async function recordedOf(cluster: ChaosCluster, client: pg.Client) {
  const recorded = (await client.query<Recorded>(RECORDED_SESSION, [cluster.settings.lease])).rows[0];
  if (!recorded) return null;
  const holder = cluster.recorder.incarnations.find(
    (i) => i.holder === recorded.holder && i.endedAt === null,
  );
  return { recorded, holder, who: holder?.replica ?? recorded.holder };
}

/**
 * The leader-session-stall fault: SIGSTOP of the recorded session's backend for the fault's
 * duration (the test runs as the server's owner, or as root), SIGCONT at the heal. Null for
 * every other kind.
 */
export async function injectSessionStall(
  cluster: ChaosCluster,
  fault: PlannedFault,
  base: Base,
  skipped: (why: string) => Active,
): Promise<Active | null> {
  if (fault.kind !== "leader-session-stall") return null;
  const url = cluster.postgres?.url;
  if (!url) throw new Error("faults: the cluster is not started");
  const client = await session(url);
  const found = await recordedOf(cluster, client).finally(() => client.end().catch(() => {}));
  if (!found) return skipped("no live term with a recorded session");
  const { recorded, who } = found;
  process.kill(recorded.pid, "SIGSTOP");
  return {
    ...base,
    target: `${who} (leader)`,
    detail: `SIGSTOP of ${who}'s recorded session (backend ${recorded.pid}, fence ${recorded.fence}) for ${fault.durationMs} ms`,
    sessionStalled: [{ holder: recorded.holder, fence: Number(recorded.fence) }],
    heal: async () => {
      // Gone already (a server restart of a paired fault): nothing to continue.
      try {
        process.kill(recorded.pid, "SIGCONT");
      } catch {}
      return Date.now();
    },
  };
}

/** The leader-session-kill fault; null for every other kind. */
export async function injectSessionKill(
  cluster: ChaosCluster,
  fault: PlannedFault,
  base: Base,
  skipped: (why: string) => Active,
): Promise<Active | null> {
  if (fault.kind !== "leader-session-kill") return null;
  const url = cluster.postgres?.url;
  if (!url) throw new Error("faults: the cluster is not started");
  const client = await session(url);
  try {
    const found = await recordedOf(cluster, client);
    if (!found) return skipped("no live term with a recorded session");
    const { recorded, holder, who } = found;
    const replica = holder ? cluster.replica(holder.replica) : null;
    const target = `${who} (leader)`;
    const what = `pg_terminate_backend of ${who}'s recorded session (backend ${recorded.pid}, fence ${recorded.fence})`;
    const done = (detail: string, ended: SessionEnd | null, heal: () => Promise<number>): Active => ({
      ...base,
      target,
      detail: ended ? detail : `${detail}: the session had already ended`,
      ...(ended ? { sessionEnded: [ended] } : {}),
      heal,
    });
    const now = async () => Date.now();
    if (fault.sessionKill === "paused") {
      const token = replica?.pause(fault.scope);
      if (!token) return skipped("the holder's sidecar is not running");
      const ended = await kill(client, recorded);
      return done(
        `${what} with its ${fault.scope} SIGSTOPped for ${fault.durationMs} ms`,
        ended,
        async () => {
          token.end();
          return Date.now();
        },
      );
    }
    if (fault.sessionKill === "renew-queued") {
      const { ended, waiting } = await killWhileRenewQueued(client, cluster.settings.lease, recorded);
      const queued =
        waiting > 0 ? `${waiting} statement(s) queued on the row lock` : "no renew queued in time";
      return done(`${what} while ${queued}`, ended, now);
    }
    return done(`${what} while it runs`, await kill(client, recorded), now);
  } finally {
    await client.end().catch(() => {});
  }
}
