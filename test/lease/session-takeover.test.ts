// The claim's session clause on a real PostgreSQL: a holder that records its server session with
// its claim can be taken over before expiry once that session is gone (terminated here with
// pg_terminate_backend, as a crash's closed socket ends it), and can no longer renew; a live
// session, a holder that recorded none, or a session another holder recorded protect the term.
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { ClaimAnswer } from "../../src/election/ports.ts";
import { migrate } from "../../src/postgres/migrate.ts";
import type { HolderSession } from "../../src/postgres/release-feed.ts";
import { PgLeaseStore } from "../../src/postgres/store.ts";
import { createTestDatabase, type TestDatabase } from "../support/postgres/database.ts";

let db: TestDatabase;
let pool: pg.Pool;
const MINUTE = 60_000;

beforeAll(async () => {
  db = await createTestDatabase();
  pool = new pg.Pool({ connectionString: db.url, max: 4 });
  await migrate(pool, new PgLeaseStore({ pool, statementTimeoutMs: 5_000 }).table);
});

afterAll(async () => {
  await pool.end();
  await db.drop();
});

/** A dedicated session, as the notice connection is, and its identity as the feed reads it. */
async function openSession(): Promise<{ session: HolderSession; end(): Promise<void> }> {
  const client = new pg.Client({ connectionString: db.url });
  client.on("error", () => {});
  await client.connect();
  const { rows } = await client.query<{ pid: number; started: string; server_started: string }>(
    `SELECT pid, to_char(backend_start AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"') AS started,
            to_char(pg_postmaster_start_time() AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"') AS server_started
       FROM pg_stat_get_activity(pg_backend_pid())`,
  );
  const row = rows[0];
  if (!row) throw new Error("no own session row");
  const session = { pid: row.pid, startedAt: row.started, serverStartedAt: row.server_started };
  return { session, end: () => client.end().catch(() => {}) };
}

async function terminate(session: HolderSession): Promise<void> {
  await pool.query("SELECT pg_terminate_backend($1)", [session.pid]);
  // Gone from pg_stat_activity only once the backend has exited.
  await expect
    .poll(
      async () => (await pool.query("SELECT 1 FROM pg_stat_activity WHERE pid = $1", [session.pid])).rowCount,
    )
    .toBe(0);
}

/** Null: a store without session takeover, which records no session. */
const storeFor = (session: HolderSession | null) =>
  new PgLeaseStore({ pool, statementTimeoutMs: 5_000, ...(session ? { holderSession: () => session } : {}) });

function won(answer: ClaimAnswer): number {
  if (!answer.won) throw new Error(`expected to win, ${answer.holder} holds it`);
  return answer.fence;
}

describe("session takeover", () => {
  it("a term whose recorded session is gone is taken at once, and its holder can no longer renew", async () => {
    const { session, end } = await openSession();
    const holder = storeFor(session);
    const fence = won(await holder.claim("gone", "a", MINUTE));
    expect(await holder.renew("gone", "a", fence, MINUTE)).toMatchObject({ renewed: true });
    expect((await holder.read("gone"))?.sessionGone).toBeUndefined();

    await terminate(session);
    await end();
    expect(await holder.read("gone")).toMatchObject({ holder: "a", sessionGone: true });
    expect(await holder.renew("gone", "a", fence, MINUTE)).toEqual({ renewed: false });
    const taken = await storeFor(null).claim("gone", "b", MINUTE);
    expect(won(taken)).toBeGreaterThan(fence);
    expect(taken).toMatchObject({ change: { reason: "session-takeover", previousHolder: "a" } });
  });

  it("under session takeover a claim without a live notice session is refused, not made unprotected", async () => {
    const store = new PgLeaseStore({ pool, statementTimeoutMs: 5_000, holderSession: () => null });
    await expect(store.claim("no-session", "a", MINUTE)).rejects.toThrow(
      "not claiming while the notice session reconnects",
    );
    // Never sent: the elector need not wait for it to settle (unanswered-writes.ts).
    await expect(store.claim("no-session", "a", MINUTE)).rejects.toMatchObject({ notSent: true });
    expect(await store.read("no-session")).toBeNull();
  });

  it("a live session, no recorded session, or one another holder recorded keeps the term", async () => {
    const live = await openSession();
    const fence = won(await storeFor(live.session).claim("alive", "a", MINUTE));
    expect(await storeFor(null).claim("alive", "b", MINUTE)).toMatchObject({
      won: false,
      holder: "a",
      fence,
    });
    await live.end();

    won(await storeFor(null).claim("none", "a", MINUTE));
    expect(await storeFor(null).claim("none", "b", MINUTE)).toMatchObject({ won: false, holder: "a" });

    // An older pglease claims without touching the session columns (another holder, or the same
    // one rolled back): the session stays in the row, and its death must not expose the new term.
    for (const [key, later] of [
      ["stale-other", "old-version"],
      ["stale-same", "a"],
    ] as const) {
      const old = await openSession();
      const first = won(await storeFor(old.session).claim(key, "a", MINUTE));
      await pool.query(
        "UPDATE pglease_leases SET holder = $2, fence = fence + 1, acquired_at = now() WHERE key = $1",
        [key, later],
      );
      await terminate(old.session);
      await old.end();
      expect(await storeFor(null).read(key)).not.toHaveProperty("sessionGone");
      expect(await storeFor(null).claim(key, "b", MINUTE)).toMatchObject({
        won: false,
        holder: later,
        fence: first + 1,
      });
    }
  });

  it("a session recorded on another run of the server (before a restart or a failover) is not judged gone", async () => {
    const gone = await openSession();
    const fence = won(
      await storeFor({ ...gone.session, serverStartedAt: "2001-01-01T00:00:00.000000Z" }).claim(
        "other-server",
        "a",
        MINUTE,
      ),
    );
    await terminate(gone.session);
    await gone.end();
    expect(await storeFor(null).read("other-server")).not.toHaveProperty("sessionGone");
    expect(await storeFor(null).claim("other-server", "b", MINUTE)).toMatchObject({
      won: false,
      holder: "a",
      fence,
    });
  });
});
