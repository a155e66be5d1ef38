// The session-takeover pieces of the chaos run on a real PostgreSQL: leader-session-kill ends the
// session the lease row records (and says when), the session watch sees it end, and the change
// log's trigger witnesses that a live term was taken over because that session was gone, and
// only then.
import { setTimeout as sleep } from "node:timers/promises";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { leaseTable, migrate, PgLeaseStore } from "../../src/postgres/index.ts";
import type { HolderSession } from "../../src/postgres/release-feed.ts";
import type { ChaosCluster } from "./cluster.ts";
import { CREATE_LEASE_LOG } from "./cluster.ts";
import { type ChaosPostgres, startChaosPostgres } from "./faketime-postgres.ts";
import { Recorder } from "./recorder.ts";
import type { PlannedFault } from "./schedule.ts";
import { injectSessionKill, injectSessionStall } from "./session-fault.ts";
import { SessionWatch } from "./session-watch.ts";

const LEASE_MS = 60_000;
let db: ChaosPostgres;
let admin: pg.Pool;
let cluster: ChaosCluster;

beforeAll(async () => {
  db = await startChaosPostgres();
  admin = new pg.Pool({ connectionString: db.server.url, max: 3 });
  admin.on("error", () => {});
  await migrate(admin, leaseTable());
  await admin.query(CREATE_LEASE_LOG);
  const recorder = new Recorder();
  // Only what the fault reads of the cluster: no replica runs here (the holders are this test's).
  cluster = { postgres: db.server, settings: { lease: "k" }, recorder } as unknown as ChaosCluster;
}, 120_000);

afterAll(async () => {
  await admin?.end();
  await db?.server.stop();
});

const ISO_US = `'YYYY-MM-DD"T"HH24:MI:SS.US"Z"'`;
const OWN_SESSION = `SELECT pid, to_char(backend_start AT TIME ZONE 'UTC', ${ISO_US}) AS "startedAt",
  to_char(pg_postmaster_start_time() AT TIME ZONE 'UTC', ${ISO_US}) AS "serverStartedAt"
  FROM pg_stat_get_activity(pg_backend_pid())`;

/** A holder with a session of its own, recorded with each of its claims as a notice session is. */
async function holderWithSession(): Promise<{ store: PgLeaseStore; client: pg.Client }> {
  const client = new pg.Client({ connectionString: db.server.url });
  client.on("error", () => {});
  await client.connect();
  const session = (await client.query<HolderSession>(OWN_SESSION)).rows[0] as HolderSession;
  const store = new PgLeaseStore({ pool: admin, statementTimeoutMs: 5_000, holderSession: () => session });
  return { store, client };
}

const planned = (sessionKill: PlannedFault["sessionKill"]): PlannedFault => ({
  kind: "leader-session-kill",
  target: "leader",
  fallback: 0,
  delayMs: 0,
  durationMs: 0,
  scope: "sidecar",
  latencyMs: 0,
  restartMode: "fast",
  stepMs: 0,
  sessionKill,
});

const tookGone = async (holder: string) =>
  (
    await admin.query<{ took: boolean | null }>(
      "SELECT took_gone_session AS took FROM chaos_lease_log WHERE holder = $1 ORDER BY seq LIMIT 1",
      [holder],
    )
  ).rows[0]?.took ?? null;

// The fault's session, in its transaction once its SELECT … FOR UPDATE locked the lease row.
// A row lock writes the locker's transaction id into the row: only that session has one.
const FAULT_HOLDS_ROW =
  "SELECT 1 FROM pg_stat_activity WHERE backend_xid IS NOT NULL AND pid <> pg_backend_pid()";

const base = () => ({ kind: "leader-session-kill" as const, target: null, startedAt: Date.now() });
const skipped = (why: string) => ({ ...base(), detail: `skipped: ${why}`, heal: async () => Date.now() });

describe("leader-session-kill, the session watch and the takeover witness", () => {
  it("kills the recorded session, the watch sees it end, and the takeover is witnessed", async () => {
    const { store, client } = await holderWithSession();
    const watch = new SessionWatch(db.server.url, "k");
    const won = await store.claim("k", "a-1", LEASE_MS);
    expect(won.won).toBe(true);
    // The watch must have seen the session alive before the kill.
    await expect.poll(() => watch.tracking()?.holder, { timeout: 30_000 }).toBe("a-1");
    const active = await injectSessionKill(cluster, planned("plain"), base(), skipped);
    expect(active?.detail).toMatch(
      /^pg_terminate_backend of a-1's recorded session \(backend \d+, fence \d+\) while it runs$/,
    );
    const ended = active?.sessionEnded?.[0];
    expect(ended).toMatchObject({ holder: "a-1", fence: won.fence });
    // The answer came after the backend had exited: nobody has that session any more.
    const { rows } = await admin.query("SELECT 1 FROM pg_stat_activity WHERE pid = $1", [
      (await admin.query("SELECT session_pid FROM pglease_leases WHERE key = 'k'")).rows[0].session_pid,
    ]);
    expect(rows).toEqual([]);
    const taker = await holderWithSession();
    const taken = await taker.store.claim("k", "b-1", LEASE_MS);
    expect(taken).toMatchObject({ won: true });
    expect(taken.fence).toBeGreaterThan(won.fence as number);
    expect(await tookGone("b-1")).toBe(true);
    await expect.poll(() => watch.ends.length, { timeout: 30_000 }).toBeGreaterThan(0);
    const seen = (await watch.stop()).find((e) => e.holder === "a-1");
    expect(seen).toMatchObject({ holder: "a-1", fence: won.fence });
    // The watch's window holds the end the fault measured.
    expect(seen?.from).toBeLessThanOrEqual(ended?.to as number);
    expect(seen?.to).toBeGreaterThanOrEqual(ended?.from as number);
    await client.end();
    await taker.client.end();
  });

  // What the README's "renewals require the session alive" means when the kill lands mid-renew:
  // PostgreSQL does not read a row again that the blocker only locked (no new row version, so no
  // recheck of the WHERE), so a renew that read the session alive before it queued commits after
  // the kill. The holder's local deadline counts from that renew's send, before the kill, so its
  // belief still ends within the window measured from the session's end.
  it("renew-queued: the kill lands while the holder's renew waits on the row lock; the renew read the session alive", async () => {
    const { store, client } = await holderWithSession();
    const won = await store.claim("q", "c-1", LEASE_MS);
    const fault = injectSessionKill(
      { ...cluster, settings: { lease: "q" } } as unknown as ChaosCluster,
      planned("renew-queued"),
      base(),
      skipped,
    );
    // The renew is sent once the fault holds the row: it queues, the session dies, then it runs.
    await expect.poll(async () => (await admin.query(FAULT_HOLDS_ROW)).rowCount, { timeout: 30_000 }).toBe(1);
    const renewed = await store.renew("q", "c-1", won.fence as number, LEASE_MS);
    const active = await fault;
    expect(active?.detail).toMatch(/while 1 statement\(s\) queued on the row lock$/);
    expect(renewed.renewed).toBe(true);
    await client.end().catch(() => {});
  });

  it("witnesses nothing when a live term is taken over by anything but a gone session", async () => {
    const { store, client } = await holderWithSession();
    await store.claim("e", "d-1", 1);
    const expired = "SELECT expires_at <= clock_timestamp() AS over FROM pglease_leases WHERE key = 'e'";
    await expect.poll(async () => (await admin.query(expired)).rows[0].over).toBe(true);
    // Expired, its session alive: an ordinary takeover.
    const other = new PgLeaseStore({ pool: admin, statementTimeoutMs: 5_000 });
    expect((await other.claim("e", "e-1", LEASE_MS)).won).toBe(true);
    expect(await tookGone("e-1")).toBe(false);
    await client.end();
  });
});

describe("leader-session-stall", () => {
  it("stops the recorded session's backend, still listed, until the heal continues it", async () => {
    const { store, client } = await holderWithSession();
    const won = await store.claim("s", "f-1", LEASE_MS);
    const stall = { ...planned("plain"), kind: "leader-session-stall" as const, durationMs: 3_000 };
    const active = await injectSessionStall(
      { ...cluster, settings: { lease: "s" } } as unknown as ChaosCluster,
      stall,
      base(),
      skipped,
    );
    expect(active?.detail).toMatch(
      /^SIGSTOP of f-1's recorded session \(backend \d+, fence \d+\) for 3000 ms$/,
    );
    expect(active?.sessionStalled).toEqual([{ holder: "f-1", fence: won.fence }]);
    const asked = client.query<{ one: number }>("SELECT 1 AS one");
    // A stopped backend answers nothing, and pg_stat_activity still lists it.
    expect(await Promise.race([asked.then(() => "answered"), sleep(300).then(() => "silent")])).toBe(
      "silent",
    );
    const pid = (await admin.query("SELECT session_pid FROM pglease_leases WHERE key = 's'")).rows[0]
      .session_pid;
    expect((await admin.query("SELECT 1 FROM pg_stat_activity WHERE pid = $1", [pid])).rowCount).toBe(1);
    await active?.heal();
    expect((await asked).rows).toEqual([{ one: 1 }]);
    await client.end();
  });
});
