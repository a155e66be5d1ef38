// A reconnection whose link stalls right after the connection handshake, before its LISTEN is
// answered. Reported in review: the handshake had a timeout, the LISTEN and the session read
// after it none, so the feed waited on them for as long as the stall lasted, with no session to
// record and no ping (there was no current connection to ping): under session takeover every
// claim was refused (NoHolderSession) until the stall ended. Now those statements have the
// ping's timeout, and the feed reconnects past a stalled one. Real PostgreSQL; the stall is a
// proxy that forwards the handshake, up to the server's first ReadyForQuery, then nothing.
import { type AddressInfo, connect, createServer, type Socket } from "node:net";
import pg from "pg";
import { afterAll, beforeAll, expect, it } from "vitest";
import { openLeases } from "../../src/leases/open-leases.ts";
import { migrate } from "../../src/postgres/migrate.ts";
import { PgReleaseFeed } from "../../src/postgres/release-feed.ts";
import { PgLeaseStore } from "../../src/postgres/store.ts";
import { createTestDatabase, type TestDatabase } from "../support/postgres/database.ts";
import { dropListeners } from "../support/postgres/listen-sessions.ts";

let db: TestDatabase;
let pool: pg.Pool;
beforeAll(async () => {
  db = await createTestDatabase();
  pool = new pg.Pool({ connectionString: db.url, max: 2 });
});
afterAll(async () => {
  await pool.end();
  await db.drop();
});

/** True once `bytes`, the server's messages from the start, hold a whole ReadyForQuery ('Z'). */
function readyForQuery(bytes: Buffer): boolean {
  for (let at = 0; at + 5 <= bytes.length; ) {
    const length = bytes.readInt32BE(at + 1);
    if (at + 1 + length > bytes.length) return false;
    if (bytes[at] === 0x5a) return true;
    at += 1 + length;
  }
  return false;
}

/**
 * Forwards to PostgreSQL; after stallNext(), the next notice connection (its startup packet names
 * application_name pglease-listen) goes silent once its handshake is done.
 */
async function stallingProxy(target: URL) {
  const sockets = new Set<Socket>();
  let stallNext = false;
  const server = createServer((client) => {
    const upstream = connect(Number(target.port), target.hostname);
    sockets.add(client).add(upstream);
    let stalls: boolean | undefined;
    let stalled = false;
    let fromServer = Buffer.alloc(0);
    client.on("data", (chunk) => {
      if (stalls === undefined) {
        stalls = stallNext && chunk.includes("pglease-listen");
        if (stalls) stallNext = false;
      }
      if (!stalled) upstream.write(chunk);
    });
    upstream.on("data", (chunk) => {
      if (stalled) return;
      client.write(chunk);
      if (!stalls) return;
      fromServer = Buffer.concat([fromServer, chunk]);
      stalled = readyForQuery(fromServer);
    });
    for (const [a, b] of [
      [client, upstream],
      [upstream, client],
    ] as const) {
      a.on("error", () => b.destroy());
      a.on("close", () => b.destroy());
    }
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const url = new URL(target);
  url.hostname = "127.0.0.1";
  url.port = String((server.address() as AddressInfo).port);
  return {
    url: url.toString(),
    stallNext: () => {
      stallNext = true;
    },
    close: async () => {
      for (const socket of sockets) socket.destroy();
      await new Promise((resolve) => server.close(resolve));
    },
  };
}

it("a reconnection stalled after its handshake is given up at the ping timeout: the feed reconnects and claims record its session again", async () => {
  const proxy = await stallingProxy(new URL(db.url));
  const errors: Error[] = [];
  const feed = new PgReleaseFeed({
    connection: { connectionString: proxy.url },
    table: new PgLeaseStore({ pool, statementTimeoutMs: 5_000 }).table,
    pinnedSession: true,
    reconnectDelayMs: 50,
    pingTimeoutMs: 500,
    onError: (error) => errors.push(error),
  });
  const store = new PgLeaseStore({ pool, statementTimeoutMs: 5_000, holderSession: () => feed.session() });
  await migrate(pool, store.table);
  try {
    await feed.start();
    const first = feed.session();
    expect(first).not.toBeNull();

    proxy.stallNext();
    expect(await dropListeners(db.url)).toBe(1);
    await expect.poll(() => feed.session(), { timeout: 2_000 }).toBeNull();
    // The stalled reconnection stays stalled to the end of the test: only giving it up helps.
    await expect
      .poll(() => feed.session()?.pid ?? errors.map((e) => e.message).join("; "), { timeout: 5_000 })
      .toEqual(expect.any(Number));
    expect(feed.session()?.pid).not.toBe(first?.pid);
    expect(errors.map((e) => e.message)).toContain("Query read timeout");
    const claim = await store.claim("after-stall", "a", 15_000);
    expect(claim.won).toBe(true);
    const { rows } = await pool.query(
      `SELECT session_pid FROM ${store.table.qualified} WHERE key = 'after-stall'`,
    );
    expect(rows[0]?.session_pid).toBe(feed.session()?.pid);
  } finally {
    await feed.close();
    await proxy.close();
  }
});

it("a LISTEN stalled at start is waited for as a slow server is: the start is retried, and opens with notices and takeover", async () => {
  const proxy = await stallingProxy(new URL(db.url));
  proxy.stallNext();
  const warnings: string[] = [];
  const opening = openLeases({
    connectionString: proxy.url,
    table: "stalled_at_start_leases",
    sessionTakeover: true,
    restartTakeover: false,
    logger: { info: () => {}, warn: (message) => warnings.push(message) },
  });
  // Before the timeout, a stalled LISTEN kept openLeases waiting for as long as the stall lasted.
  const leases = await Promise.race([opening, new Promise<null>((r) => setTimeout(() => r(null), 10_000))]);
  try {
    expect(leases?.notify).toBe(true);
    expect(warnings.join("\n")).toMatch(
      /PostgreSQL did not answer in time yet \(Query read timeout\); retrying/,
    );
  } finally {
    if (leases) await leases.close();
    else void opening.then((l) => l.close()).catch(() => {});
    await proxy.close();
  }
});
