// The elector hears of a release feed's reconnections through the optional
// ReleaseFeed.subscribeReconnects; PgReleaseFeed tells of them through its onReconnect option.
// This joins the two until PgReleaseFeed implements the member itself. The feed stays real:
// a real LISTEN connection, dropped by the server, reconnected by PgReleaseFeed.
import pg from "pg";
import type { ReleaseFeed } from "../../src/election/ports.ts";
import { PgReleaseFeed, type PgReleaseFeedOptions } from "../../src/lease/release-feed.ts";

export class ReconnectingFeed implements ReleaseFeed {
  readonly feed: PgReleaseFeed;
  readonly #reconnects = new Set<() => void>();
  reconnections = 0;

  constructor(options: Omit<PgReleaseFeedOptions, "onReconnect">) {
    this.feed = new PgReleaseFeed({
      ...options,
      onReconnect: () => {
        this.reconnections++;
        for (const listener of this.#reconnects) listener();
      },
    });
  }

  subscribe(listener: (key: string) => void): () => void {
    return this.feed.subscribe(listener);
  }

  subscribeReconnects(listener: () => void): () => void {
    this.#reconnects.add(listener);
    return () => this.#reconnects.delete(listener);
  }
}

/** Ends the LISTEN session on the server, as a failover or an idle-session killer would. */
export async function dropListeners(url: string): Promise<number> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    const { rowCount } = await client.query(
      `SELECT pg_terminate_backend(pid) FROM pg_stat_activity
        WHERE datname = current_database() AND application_name = 'pglease-listen'`,
    );
    return rowCount ?? 0;
  } finally {
    await client.end();
  }
}
