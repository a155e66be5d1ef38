// Release announcements over LISTEN/NOTIFY on one dedicated connection per process, so
// followers claim at once instead of at their next poll. Optional: behind a transaction-mode
// PgBouncer LISTEN does not work, and followers fall back to polling.
//
// A listening connection only receives, so nothing would notice it dying: a periodic ping with a
// timeout (and TCP keepalive) finds a terminated or black-holed one in seconds. After every
// reconnection the leases that are free now are announced as if released, because a notice sent
// while the connection was down is lost. Followers wait on notices only while the feed is known
// healthy (healthy(): connected and its last check answered in time); a drop makes them poll.
import { Socket } from "node:net";
import pg from "pg";
import type { ReleaseFeed } from "../election/ports.ts";
import type { LeaseTable } from "./table.ts";

export interface PgReleaseFeedOptions {
  /** Where to LISTEN: the same server and credentials as the pool (e.g. `pool.options`). */
  connection: pg.ClientConfig;
  table: LeaseTable;
  /** Delay before reconnecting after the listening connection drops (default 1 s). */
  reconnectDelayMs?: number;
  /** How often the listening connection is checked with a query (default 5 s). */
  pingIntervalMs?: number;
  /** How long that query, or a connection attempt, may take before the connection counts as dead (default 2 s). */
  pingTimeoutMs?: number;
  onError?: (error: Error) => void;
  /** Called after every reconnection, once the leases free by then have been announced. */
  onReconnect?: () => void;
}

interface Listening {
  client: pg.Client;
  /** The raw socket: a black-holed connection never answers a graceful end, so it is destroyed. */
  socket: Socket;
}

// Run on the new connection after LISTEN, so a release after this read is announced by NOTIFY.
const FREE_LEASES = (t: LeaseTable) => `SELECT key FROM ${t.qualified} WHERE expires_at <= clock_timestamp()`;

const PING = "SELECT 1";

export class PgReleaseFeed implements ReleaseFeed {
  readonly #options: PgReleaseFeedOptions;
  readonly #listeners = new Set<(key: string) => void>();
  readonly #reconnectListeners = new Set<() => void>();
  readonly #unhealthyListeners = new Set<() => void>();
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

  /** Called after every reconnection: notices sent while the connection was down were lost. */
  subscribeReconnects(listener: () => void): () => void {
    this.#reconnectListeners.add(listener);
    return () => this.#reconnectListeners.delete(listener);
  }

  /**
   * Known healthy: listening, and alive within one ping interval and timeout. Between two pings a
   * connection may die unnoticed; a notice lost then costs a follower at most one observed expiry.
   */
  healthy(): boolean {
    const { pingIntervalMs = 5_000, pingTimeoutMs = 2_000 } = this.#options;
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
    this.#ping ??= setInterval(() => this.#checkAlive(), this.#options.pingIntervalMs ?? 5_000);
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
    const listening = { client, socket };
    client.on("notification", (message) => {
      if (message.channel === this.#options.table.channel && message.payload) this.#announce(message.payload);
    });
    client.on("error", (error) => this.#onDrop(listening, error));
    client.on("end", () => this.#onDrop(listening));
    try {
      await client.connect();
      await client.query(`LISTEN "${this.#options.table.channel}"`);
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
      .query(query)
      .then(() => {
        if (this.#current === current) this.#aliveAt = performance.now();
      })
      .catch((error: Error) => this.#onDrop(current, error))
      .finally(() => {
        this.#pinging = false;
      });
  }

  #onDrop(listening: Listening, error?: Error): void {
    if (this.#current !== listening) return;
    this.#current = null;
    listening.socket.destroy();
    if (error) this.#options.onError?.(error);
    for (const listener of this.#unhealthyListeners) listener();
    this.#reconnectLater();
  }

  #reconnectLater(): void {
    if (this.#closed) return;
    const delayMs = reconnectDelay(this.#failedAttempts, this.#options.reconnectDelayMs ?? 1_000);
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

  async close(): Promise<void> {
    this.#closed = true;
    if (this.#retry) clearTimeout(this.#retry);
    if (this.#ping) clearInterval(this.#ping);
    const current = this.#current;
    this.#current = null;
    if (current) await this.#end(current);
  }
}

const RECONNECT_CAP_MS = 30_000;

/**
 * The wait before reconnection attempt `failed + 1`: doubling from `baseMs` up to 30 s, so a long
 * database outage costs a warning every 30 s, not every second. Followers poll meanwhile.
 */
export function reconnectDelay(failed: number, baseMs: number): number {
  return Math.min(RECONNECT_CAP_MS, baseMs * 2 ** Math.min(failed, 20));
}
