// Steady-state cost of a quiet election, per pod: database statements and new connections
// (counted on the wire by a proxy in front of a database each system has to itself), API
// requests (the log of the election's recording proxy in front of the API server), connections
// held and resident memory. Three pods per system, one leader, nothing failing, watched for a
// fixed window and scaled to an hour.
import { setTimeout as delay } from "node:timers/promises";
import type pg from "pg";
import { Lane, type LaneEnvironment } from "../peers/lane.ts";
import { type PeerTiming, pgleaseRenewMs, SYSTEMS, type SystemId } from "../peers/systems.ts";

const HOUR_MS = 3_600_000;
/** client-go's acquire loop waits retry × (1 + U·1.2): 1.6 retry periods on average. */
const CLIENT_GO_MEAN_FOLLOWER_WAIT = 1.6;
/**
 * pglease's publisher (src/kube/pod-watch.ts): two watches, its pod's and its peers'
 * (peer-view.ts), each renewed every 30–60 min from its last resourceVersion (one request, no
 * re-read); nothing else while they stream.
 */
const PGLEASE_MEAN_WATCH_MS = 2_700_000;
/** The release feed's check of its listening connection (src/postgres/release-feed.ts, its default). */
// The notice connection's ping: the sidecar sends it once per lease duration.
const pgleasePingMs = (timing: PeerTiming) => timing.leaseMs;
// Every pglease pod, leader or not, announces itself as a candidate once per lease duration.
const pgleaseAnnounceMs = (timing: PeerTiming) => timing.leaseMs;
/** pglease --no-notify polls every retry: the follower behaviour without notices, side by side. */
export const STEADY_SYSTEMS: SystemId[] = ["pglease", "pglease-no-notify", "client-go", "advisory-lock"];

// Connections the candidates hold, the bench's own left out; a LISTEN session is pinned for good.
const CONNECTIONS = `SELECT count(*)::int AS total,
    count(*) FILTER (WHERE application_name = 'pglease-listen')::int AS listening,
    count(*) FILTER (WHERE application_name = 'bench-advisory')::int AS advisory
  FROM pg_stat_activity
  WHERE datname = $1 AND backend_type = 'client backend' AND application_name NOT IN ('pglease-bench', 'pglease-demo')`;

export interface PerPodHour {
  /** Counted in the window. */
  inWindow: number;
  /** inWindow × one hour ÷ window ÷ pods. */
  perPodPerHour: number;
  /**
   * A follower's share: what the leader sends at its fixed periods (pglease: a renew every renew
   * interval and a ping; the advisory lock: nothing once it holds the lock) taken out of the
   * count, the rest × one hour ÷ window ÷ followers.
   */
  perFollowerPerHour?: number;
  /** What the algorithm's periods predict, per pod (mean over the pods) per hour. */
  expectedPerPodPerHour: number;
}

export interface SteadyCost {
  system: SystemId;
  label: string;
  pods: number;
  windowMs: number;
  statements: PerPodHour | null;
  sessionsOpened: { inWindow: number; perPodPerHour: number } | null;
  apiRequests: (PerPodHour & { byKind: Record<string, number> }) | null;
  connections: { totalPerPod: number; pinnedPerPod: number } | null;
  /** Mean over the pods still running at the end; null when none is. */
  rssMbPerPod: number | null;
  /** Pods still running at the end of the window: fewer than `pods` means one exited (client-go exits when it loses its lease). */
  podsRunningAtEnd: number;
}

/** What the leader of `system` sends per hour at its fixed periods. */
function leaderPerHour(system: SystemId, timing: PeerTiming): number {
  const perHour = (periodMs: number) => HOUR_MS / periodMs;
  if (system === "pglease" || system === "pglease-health-gate" || system === "pglease-two-clusters")
    return (
      perHour(pgleaseRenewMs(timing)) + perHour(pgleasePingMs(timing)) + perHour(pgleaseAnnounceMs(timing))
    );
  if (system === "pglease-no-notify")
    return perHour(pgleaseRenewMs(timing)) + perHour(pgleaseAnnounceMs(timing));
  return 0;
}

function expected(system: SystemId, timing: PeerTiming, pods: number): { statements: number; api: number } {
  const perHour = (periodMs: number) => HOUR_MS / periodMs;
  const followers = pods - 1;
  const api = 2 * perHour(PGLEASE_MEAN_WATCH_MS);
  switch (system) {
    // The health gate reads its pod from the watch the publisher keeps: no statement, no request more.
    case "pglease-health-gate":
    case "pglease":
    case "pglease-two-clusters":
      // A follower on a healthy feed pings, announces, and reads at each observed expiry: the leader
      // renewed between 0 and one renew interval before that read, so the next expiry is half one off a lease away.
      return {
        statements:
          (leaderPerHour(system, timing) +
            followers *
              (perHour(pgleasePingMs(timing)) +
                perHour(pgleaseAnnounceMs(timing)) +
                perHour(timing.leaseMs - pgleaseRenewMs(timing) / 2))) /
          pods,
        api,
      };
    case "pglease-no-notify":
    case "pglease-session-takeover":
      return {
        statements:
          (leaderPerHour(system, timing) +
            followers * (perHour(timing.retryMs) + perHour(pgleaseAnnounceMs(timing)))) /
          pods,
        api,
      };
    case "client-go":
    case "client-go-release":
    case "client-go-same-identity":
      return {
        statements: 0,
        api:
          (perHour(timing.retryMs) + followers * perHour(CLIENT_GO_MEAN_FOLLOWER_WAIT * timing.retryMs)) /
          pods,
      };
    case "advisory-lock":
      return { statements: (followers * perHour(timing.retryMs)) / pods, api: 0 };
  }
}

interface Snapshot {
  at: number;
  statements: number;
  sessions: number;
  requests: number;
}

function snapshot(lane: Lane): Snapshot {
  const counts = lane.counter?.counts() ?? { statements: 0, connections: 0 };
  return {
    at: performance.now(),
    statements: counts.statements,
    sessions: counts.connections,
    requests: lane.kube?.requests.length ?? 0,
  };
}

async function costOf(pool: pg.Pool, lane: Lane, before: Snapshot, after: Snapshot): Promise<SteadyCost> {
  const pods = lane.candidates.length;
  const windowMs = after.at - before.at;
  const scale = (n: number) => (n * HOUR_MS) / windowMs / pods;
  const model = expected(lane.system.id, lane.timing, pods);
  const byKind: Record<string, number> = {};
  for (const r of lane.kube?.requests.slice(before.requests, after.requests) ?? []) {
    const kind = `${r.verb ?? r.method} ${r.resource ?? r.path}${r.subresource ? `/${r.subresource}` : ""}`;
    byKind[kind] = (byKind[kind] ?? 0) + 1;
  }
  let connections: SteadyCost["connections"] = null;
  if (lane.database) {
    const { rows } = await pool.query<{ total: number; listening: number; advisory: number }>(CONNECTIONS, [
      lane.database.name,
    ]);
    const row = rows[0] ?? { total: 0, listening: 0, advisory: 0 };
    const pinned = lane.system.kind === "advisory-lock" ? row.advisory : row.listening;
    connections = { totalPerPod: row.total / pods, pinnedPerPod: pinned / pods };
  }
  const rss = (await Promise.all(lane.candidates.map((c) => c.rssMb()))).filter(
    (v): v is number => v !== null,
  );
  const requests = after.requests - before.requests;
  const statements = after.statements - before.statements;
  const sessions = after.sessions - before.sessions;
  return {
    system: lane.system.id,
    label: lane.system.label,
    pods,
    windowMs,
    statements: lane.database
      ? {
          inWindow: statements,
          perPodPerHour: scale(statements),
          perFollowerPerHour:
            ((statements * HOUR_MS) / windowMs - leaderPerHour(lane.system.id, lane.timing)) / (pods - 1),
          expectedPerPodPerHour: model.statements,
        }
      : null,
    sessionsOpened: lane.database ? { inWindow: sessions, perPodPerHour: scale(sessions) } : null,
    apiRequests: lane.kube
      ? { inWindow: requests, perPodPerHour: scale(requests), expectedPerPodPerHour: model.api, byKind }
      : null,
    connections,
    rssMbPerPod: rss.length > 0 ? rss.reduce((a, b) => a + b, 0) / rss.length : null,
    podsRunningAtEnd: lane.candidates.filter((c) => c.running).length,
  };
}

/**
 * Opens one quiet election per system, lets start-up traffic pass, then counts over `windowMs`.
 * `benchPool` reads pg_stat_activity from outside the measured databases.
 */
export async function measureSteadyCost(
  env: LaneEnvironment,
  benchPool: pg.Pool,
  timing: PeerTiming,
  windowMs: number,
  progress: (line: string) => void,
  systems: SystemId[] = STEADY_SYSTEMS,
): Promise<SteadyCost[]> {
  const opened = await Promise.allSettled(
    systems.map((id) => Lane.open(`steady-${id}`, SYSTEMS[id], timing, env, { countStatements: true })),
  );
  const lanes = opened.flatMap((r) => (r.status === "fulfilled" ? [r.value] : []));
  try {
    const failed = opened.find((r): r is PromiseRejectedResult => r.status === "rejected");
    if (failed) throw failed.reason;
    await Promise.all(lanes.map((lane) => lane.settle()));
    // Start-up traffic (first claims, the first publish, the watch) stays out of the window.
    await delay(2 * timing.retryMs + 1_000, undefined, { signal: env.signal });
    const before = lanes.map(snapshot);
    progress(`peers: steady state: counting for ${(windowMs / 1000).toFixed(0)} s`);
    await delay(windowMs, undefined, { signal: env.signal });
    const after = lanes.map(snapshot);
    return await Promise.all(
      lanes.map((lane, i) => costOf(benchPool, lane, before[i] as Snapshot, after[i] as Snapshot)),
    );
  } finally {
    await Promise.all(lanes.map((lane) => lane.close()));
  }
}
