// Every statement the connections of a pool send, seen on the client side: the lease store takes
// a connection and queries on it (so that a statement that waited past its deadline is dropped
// unsent), so wrapping pool.query alone would miss it. Install before the pool opens a connection.
import type pg from "pg";

export interface SentStatement {
  text: string;
  /** The prepared statement's name, "" for an unnamed one. */
  name: string;
}

/** Calls `seen` for each statement sent on any connection `pool` opens from now on. */
export function watchStatements(pool: pg.Pool, seen: (statement: SentStatement) => void): void {
  if (pool.totalCount > 0) throw new Error("watchStatements: install it before the pool opens a connection");
  pool.on("connect", (client) => {
    const query = client.query.bind(client) as (...args: unknown[]) => unknown;
    client.query = ((...args: unknown[]) => {
      const config = args[0] as { name?: string; text?: string } | string;
      seen(
        typeof config === "string"
          ? { text: config, name: "" }
          : { text: config.text ?? "", name: config.name ?? "" },
      );
      return query(...args);
    }) as typeof client.query;
  });
}
