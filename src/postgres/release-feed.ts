// Release announcements over LISTEN/NOTIFY on one dedicated connection per process, so
// followers claim at once instead of at their next poll. Optional: behind a transaction-mode
// PgBouncer LISTEN does not work, and followers fall back to polling.
//
// A listening connection only receives, so nothing would notice it dying: a periodic ping with a
// timeout (and TCP keepalive) finds a terminated or black-holed one. The ping is sent once per
// lease duration, not more often: between pings a follower still reads at each observed expiry,
// so a notice lost to an unnoticed death costs at most that expiry either way, and a quiet pod's
// statements stay below a polling advisory lock's. After every
// reconnection the leases that are free now are announced as if released, because a notice sent
// while the connection was down is lost. Followers wait on notices only while the feed is known
// healthy (healthy(): connected and its last check answered in time); a drop makes them poll.
import { Socket } from "node:net";
import pg from "pg";
import type { ReleaseFeed } from "../election/ports.ts";
import type { LeaseTable } from "./table.ts";

const DEFAULT_PING_INTERVAL_MS = 15_000;

export interface PgReleaseFeedOptions {
  /** Where to LISTEN: the same server and credentials as the pool (e.g. `pool.options`). */
  connection: pg.ClientConfig;
  table: LeaseTable;
  /** Delay before reconnecting after the listening connection drops (default 1 s). */
  reconnectDelayMs?: number;
  /** How often the listening connection is checked with a query (default 15 s, the default lease duration). */
  pingIntervalMs?: number;
  /** How long that query, or a connection attempt, may take before the connection counts as dead (default 2 s). */
  pingTimeoutMs?: number;
  onError?: (error: Error) => void;
  /** Session takeover: a ping answered by another backend than the recorded one counts as a drop. */
  pinnedSession?: boolean;
  /** Called after every reconnection, once the leases free by then have been announced. */
  onReconnect?: () => void;
}

interface Listening {
  client: pg.Client;
  /** The raw socket: a black-holed connection never answers a graceful end, so it is destroyed. */
  socket: Socket;
  session: HolderSession | null;
}

/** A server session, named as pg_stat_activity names it: a pid is reused, a pid and start are not. */
export interface HolderSession {
  pid: number;
  /** backend_start in ISO 8601 with its microseconds: a JavaScript Date would drop them. */
  startedAt: string;
  /** pg_postmaster_start_time() of its server, likewise: a pid names a session on one server run. */
  serverStartedAt: string;
}

// Run on the new connection after LISTEN, so a release after this read is announced by NOTIFY.
const FREE_LEASES = (t: LeaseTable) => `SELECT key FROM ${t.qualified} WHERE expires_at <= clock_timestamp()`;

// The backend answering: behind a pooler it can change under the connection.
const PING = "SELECT pg_backend_pid() AS pid";

// The listening session's own row: always visible to it, whatever its privileges.
const ISO_US = `'YYYY-MM-DD"T"HH24:MI:SS.US"Z"'`;
const OWN_SESSION = `SELECT pid, to_char(backend_start AT TIME ZONE 'UTC', ${ISO_US}) AS started,
       to_char(pg_postmaster_start_time() AT TIME ZONE 'UTC', ${ISO_US}) AS server_started
  FROM pg_stat_get_activity(pg_backend_pid())`;

export class PgReleaseFeed implements ReleaseFeed {
  readonly #options: PgReleaseFeedOptions;
  readonly #listeners = new Set<(key: string) => void>();
  readonly #reconnectListeners = new Set<() => void>();
  readonly #unhealthyListeners = new Set<() => void>();
  readonly #handoverListeners = new Set<(key: string) => void>();
  readonly #sessionLostListeners = new Set<() => void>();
  /** When the listening connection last proved alive (LISTEN done, or a ping answered). */
  #aliveAt = Number.NEGATIVE_INFINITY;
  #current: Listening | null = null;
  #closed = false;
  #retry: NodeJS.Timeout | null = null;
  /** Reconnection attempts that failed since the connection was last up. */
  #failedAttempts = 0;
  #ping: NodeJS.Timeout | null = null;
  #pinging = false;

  constructor(options: PgReleaseFeedOptions) {
    this.#options = options;
  }

  subscribe(listener: (key: string) => void): () => void {
    this.#listeners.add(listener);
    return () => this.#listeners.delete(listener);
  }

  /**
   * Handover requests (pglease handover) for any key, on their own channel so electors never take
   * one for a release. A hint too: the listener checks the lease row before it acts.
   */
  subscribeHandovers(listener: (key: string) => void): () => void {
    this.#handoverListeners.add(listener);
    return () => this.#handoverListeners.delete(listener);
  }

  /** Called after every reconnection: notices sent while the connection was down were lost. */
  subscribeReconnects(listener: () => void): () => void {
    this.#reconnectListeners.add(listener);
    return () => this.#reconnectListeners.delete(listener);
  }

  /** The listening session while connected: recorded with leases claimed under session takeover. */
  session(): HolderSession | null {
    return this.#current?.session ?? null;
  }

  /** Session takeover: called as this process gives up the session its claims recorded (#abandon). */
  subscribeSessionLost(listener: () => void): () => void {
    this.#sessionLostListeners.add(listener);
    return () => this.#sessionLostListeners.delete(listener);
  }

  /**
   * Known healthy: listening, and alive within one ping interval and timeout. Between two pings a
   * connection may die unnoticed; a notice lost then costs a follower at most one observed expiry.
   */
  healthy(): boolean {
    const { pingIntervalMs = DEFAULT_PING_INTERVAL_MS, pingTimeoutMs = 2_000 } = this.#options;
    return (
      !this.#closed &&
      this.#current !== null &&
      performance.now() - this.#aliveAt <= pingIntervalMs + pingTimeoutMs
    );
  }

  /** Called when the connection is found dead: notices are not heard until it is back. */
  subscribeUnhealthy(listener: () => void): () => void {
    this.#unhealthyListeners.add(listener);
    return () => this.#unhealthyListeners.delete(listener);
  }

  /** Resolves once listening; later drops reconnect in the background. */
  async start(): Promise<void> {
    await this.#connect();
    this.#ping ??= setInterval(
      () => this.#checkAlive(),
      this.#options.pingIntervalMs ?? DEFAULT_PING_INTERVAL_MS,
    );
    this.#ping.unref();
  }

  #announce(key: string): void {
    for (const listener of this.#listeners) listener(key);
  }

  async #connect(): Promise<Listening> {
    const timeoutMs = this.#options.pingTimeoutMs ?? 2_000;
    const socket = new Socket();
    const client = new pg.Client({
      ...this.#options.connection,
      application_name: "pglease-listen",
      stream: () => socket,
      connectionTimeoutMillis: timeoutMs,
      keepAlive: true,
      keepAliveInitialDelayMillis: 5_000,
    });
    const listening: Listening = { client, socket, session: null };
    client.on("notification", (message) => {
      if (!message.payload) return;
      if (message.channel === this.#options.table.channel) this.#announce(message.payload);
      if (message.channel === this.#options.table.handoverChannel) {
        for (const listener of this.#handoverListeners) listener(message.payload);
      }
    });
    client.on("error", (error) => this.#onDrop(listening, error));
    client.on("end", () => this.#onDrop(listening));
    // The handshake has its own timeout; these too, as a ping has: until they answer there is no
    // connection to ping, and under session takeover no session for a claim to record.
    const bounded = (text: string) => ({ text, query_timeout: timeoutMs });
    try {
      await client.connect();
      await client.query(bounded(`LISTEN "${this.#options.table.channel}"`));
      await client.query(bounded(`LISTEN "${this.#options.table.handoverChannel}"`));
      const own = await client.query<{ pid: number; started: string; server_started: string }>(
        bounded(OWN_SESSION),
      );
      const row = own.rows[0];
      if (row)
        listening.session = { pid: row.pid, startedAt: row.started, serverStartedAt: row.server_started };
    } catch (error) {
      socket.destroy();
      throw error;
    }
    if (this.#closed) {
      await this.#end(listening);
      return listening;
    }
    this.#current = listening;
    this.#aliveAt = performance.now();
    return listening;
  }

  #checkAlive(): void {
    const current = this.#current;
    if (!current || this.#pinging) return;
    this.#pinging = true;
    const query = { text: PING, query_timeout: this.#options.pingTimeoutMs ?? 2_000 };
    current.client
      .query<{ pid: number }>(query)
      .then(({ rows }) => {
        if (this.#current === current) this.#aliveAt = performance.now();
        // Under session takeover a recorded session must be this connection's for good: a pooler
        // that moved it to another backend would leave a session that ends while this one lives.
        const pid = rows[0]?.pid;
        if (this.#options.pinnedSession && current.session && pid !== current.session.pid) {
          this.#onDrop(current, new SessionMoved(current.session.pid, pid));
        }
      })
      .catch((error: Error) => this.#onDrop(current, error))
      .finally(() => {
        this.#pinging = false;
      });
  }

  #onDrop(listening: Listening, error?: Error): void {
    if (this.#current !== listening) return;
    this.#abandon();
    listening.socket.destroy();
    if (error) this.#options.onError?.(error);
    for (const listener of this.#unhealthyListeners) listener();
    this.#reconnectLater();
  }

  #reconnectLater(): void {
    if (this.#closed) return;
    const delayMs = reconnectDelay(this.#failedAttempts, this.#options.reconnectDelayMs ?? 1_000, {
      pinnedSession: this.#options.pinnedSession === true,
    });
    this.#retry = setTimeout(() => {
      this.#retry = null;
      this.#reconnect().then(
        () => {
          this.#failedAttempts = 0;
        },
        (error: Error) => {
          this.#failedAttempts++;
          this.#options.onError?.(error);
          this.#reconnectLater();
        },
      );
    }, delayMs);
  }

  async #reconnect(): Promise<void> {
    const listening = await this.#connect();
    if (this.#current !== listening) return;
    try {
      const { rows } = await listening.client.query<{ key: string }>(FREE_LEASES(this.#options.table));
      for (const { key } of rows) this.#announce(key);
    } catch (error) {
      this.#onDrop(listening, error as Error);
      return;
    }
    this.#options.onReconnect?.();
    for (const listener of this.#reconnectListeners) listener();
  }

  async #end(listening: Listening): Promise<void> {
    const bound = new Promise<void>((resolve) => setTimeout(resolve, 1_000).unref());
    await Promise.race([listening.client.end().catch(() => {}), bound]);
    listening.socket.destroy();
  }

  /**
   * Gives up the current session: no claim records it from here on, and every term that did ends
   * locally (the electors' session-lost listeners) before the caller closes its socket.
   *
   * Why this order is safe. A follower may take a term once the server no longer lists its
   * recorded session. A session this process abandons while the server still runs it (its ping
   * past the timeout: a stalled backend, a loaded server, a network stall; or closed at close())
   * ends only once its backend reads the closed socket, which is after socket.destroy(), so after
   * these listeners have run, all in this one synchronous turn: no leader of this process
   * believes by then, and a renew still out counts for nothing (its elector's term is over). The
   * order matters even without a stall: once destroy() has run, a backend that is not stalled may
   * exit, and a follower in another process claim, before this turn would end. Ending the terms
   * costs nothing: a term whose session is abandoned can never be renewed past that session's
   * end. A drop that the server or the network decided first (a terminated backend, a reset,
   * TCP keepalive giving up, a pooler that moved the session) may be seen on the server before
   * this runs: that is the server dropping a live session, the window docs/guarantees.md documents (Session takeover), which
   * ends here as soon as this process hears of it, and at the latest at the local deadline (a
   * renew interval plus a call timeout after the last good renew).
   */
  #abandon(): void {
    this.#current = null;
    for (const listener of this.#sessionLostListeners) listener();
  }

  async close(): Promise<void> {
    this.#closed = true;
    if (this.#retry) clearTimeout(this.#retry);
    if (this.#ping) clearInterval(this.#ping);
    const current = this.#current;
    if (!current) return;
    this.#abandon();
    await this.#end(current);
  }
}

export class SessionMoved extends Error {
  constructor(recorded: number, now: number | undefined) {
    super(
      `the notice connection's server session moved from backend ${recorded} to ${now} (a pooler between pglease and PostgreSQL?): session takeover needs a direct connection`,
    );
    this.name = "SessionMoved";
  }
}

const RECONNECT_CAP_MS = 30_000;

/**
 * The wait before reconnection attempt `failed + 1`: doubling from `baseMs` up to 30 s, so a long
 * database outage costs a warning every 30 s, not every second. Followers poll meanwhile. Under
 * session takeover (`pinnedSession`) nobody claims without this session, so the wait stays at the
 * base: a doubled one would keep the lease leaderless for up to 30 s after the server is back.
 */
export function reconnectDelay(
  failed: number,
  baseMs: number,
  options: { pinnedSession?: boolean } = {},
): number {
  if (options.pinnedSession) return baseMs;
  return Math.min(RECONNECT_CAP_MS, baseMs * 2 ** Math.min(failed, 20));
}
