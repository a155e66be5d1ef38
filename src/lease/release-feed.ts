// Release announcements over LISTEN/NOTIFY on one dedicated connection per process, so
// followers claim at once instead of at their next poll. Optional: behind a transaction-mode
// PgBouncer LISTEN does not work, and followers fall back to polling.
import pg from "pg";
import type { ReleaseFeed } from "../election/ports.ts";
import type { LeaseTable } from "./table.ts";

export interface PgReleaseFeedOptions {
  /** Where to LISTEN: the same server and credentials as the pool (e.g. `pool.options`). */
  connection: pg.ClientConfig;
  table: LeaseTable;
  /** Delay before reconnecting after the listening connection drops. */
  reconnectDelayMs?: number;
  onError?: (error: Error) => void;
  /** Called after every (re)connection: a notice may have been missed while disconnected. */
  onReconnect?: () => void;
}

export class PgReleaseFeed implements ReleaseFeed {
  readonly #options: PgReleaseFeedOptions;
  readonly #listeners = new Set<(key: string) => void>();
  #client: pg.Client | null = null;
  #closed = false;
  #retry: NodeJS.Timeout | null = null;

  constructor(options: PgReleaseFeedOptions) {
    this.#options = options;
  }

  subscribe(listener: (key: string) => void): () => void {
    this.#listeners.add(listener);
    return () => this.#listeners.delete(listener);
  }

  /** Resolves once listening; later drops reconnect in the background. */
  async start(): Promise<void> {
    await this.#connect();
  }

  async #connect(): Promise<void> {
    const client = new pg.Client({
      ...this.#options.connection,
      application_name: "pglease-listen",
      keepAlive: true,
    });
    client.on("notification", (message) => {
      if (message.channel !== this.#options.table.channel || !message.payload) return;
      for (const listener of this.#listeners) listener(message.payload);
    });
    client.on("error", (error) => {
      this.#options.onError?.(error);
      this.#onDrop(client);
    });
    client.on("end", () => this.#onDrop(client));
    try {
      await client.connect();
      await client.query(`LISTEN "${this.#options.table.channel}"`);
    } catch (error) {
      await client.end().catch(() => {});
      throw error;
    }
    if (this.#closed) {
      await client.end();
      return;
    }
    this.#client = client;
  }

  #onDrop(client: pg.Client): void {
    if (this.#client !== client) return;
    this.#client = null;
    client.end().catch(() => {});
    this.#reconnectLater();
  }

  #reconnectLater(): void {
    if (this.#closed) return;
    this.#retry = setTimeout(() => {
      this.#retry = null;
      this.#connect().then(
        () => this.#options.onReconnect?.(),
        (error: Error) => {
          this.#options.onError?.(error);
          this.#reconnectLater();
        },
      );
    }, this.#options.reconnectDelayMs ?? 1_000);
  }

  async close(): Promise<void> {
    this.#closed = true;
    if (this.#retry) clearTimeout(this.#retry);
    const client = this.#client;
    this.#client = null;
    await client?.end().catch(() => {});
  }
}
