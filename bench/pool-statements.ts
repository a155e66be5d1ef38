// Every statement the connections of a pool send, seen on the client side: the lease store takes
// a connection and queries on it (so that a statement that waited past its deadline is dropped
// unsent), so wrapping pool.query alone would miss it. Install before the pool opens a connection.
import type pg from "pg";

export interface SentStatement {
  text: string;
  /** The prepared statement's name, "" for an unnamed one. */
  name: string;
}

/**
 * Calls `seen` for each statement sent on any connection `pool` opens from now on. A function it
 * returns is called once that statement's answer (or failure) arrives, for a statement run as a
 * promise (the lease store's are).
 */
export function watchStatements(
  pool: pg.Pool,
  seen: (statement: SentStatement) => (() => void) | undefined,
): void {
  if (pool.totalCount > 0) throw new Error("watchStatements: install it before the pool opens a connection");
  pool.on("connect", (client) => {
    const query = client.query.bind(client) as (...args: unknown[]) => unknown;
    client.query = ((...args: unknown[]) => {
      const config = args[0] as { name?: string; text?: string } | string;
      const answered = seen(
        typeof config === "string"
          ? { text: config, name: "" }
          : { text: config.text ?? "", name: config.name ?? "" },
      );
      const result = query(...args);
      // A branch of its own: the caller still gets the very promise, and its failure, unchanged.
      if (answered && result instanceof Promise) result.then(answered, answered);
      return result;
    }) as typeof client.query;
  });
}
