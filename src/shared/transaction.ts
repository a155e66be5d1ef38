// One transaction on a checked-out pool client, for every caller that needs more than one
// statement in it (the fence guard, both migrations). It owns the parts that are easy to get
// wrong: the connection's 'error' event while checked out, a COMMIT that PostgreSQL answers with
// ROLLBACK, and handing back a client whose state is unknown.
import type { Pool, PoolClient } from "pg";

export interface TransactionOptions {
  /** The statement that opens the transaction (isolation level, SET LOCAL …). Default "BEGIN". */
  begin?: string;
  /** Why the transaction could not commit: PostgreSQL had aborted it after a statement failed. */
  abortedError?: () => Error;
  /** Why the transaction could not commit: something inside it ran COMMIT or ROLLBACK itself. */
  endedError?: () => Error;
  /**
   * The error to throw in place of the one the transaction failed with, given what its connection
   * reported while checked out (a session PostgreSQL ended comes as an 'error' event when no
   * statement was running); undefined keeps the original.
   */
  failedError?: (error: unknown, connectionError: Error | undefined) => Error | undefined;
}

const defaultAborted = () =>
  new Error("a statement in the transaction failed and its error was caught: nothing was committed");
const defaultEnded = () =>
  new Error(
    "the transaction was ended (COMMIT or ROLLBACK) before its end: what followed was not part of it",
  );

/** Runs `fn` in one transaction on its own client; commits when it returns, rolls back when it throws. */
export async function inTransaction<T>(
  pool: Pick<Pool, "connect">,
  fn: (client: PoolClient) => Promise<T>,
  options: TransactionOptions = {},
): Promise<T> {
  const client = await pool.connect();
  let broken: Error | undefined;
  // While checked out, a dying connection's 'error' event is ours to handle (the pool only
  // listens to idle clients); unheard, it would crash the process.
  const onConnectionError = (error: Error) => {
    broken ??= error;
  };
  client.on("error", onConnectionError);
  try {
    await client.query(options.begin ?? "BEGIN");
    const result = await fn(client);
    const status = client.getTransactionStatus();
    if (status === "E") throw (options.abortedError ?? defaultAborted)();
    if (status !== "T") throw (options.endedError ?? defaultEnded)();
    const commit = await client.query("COMMIT");
    // PostgreSQL answers COMMIT of an aborted transaction with ROLLBACK rather than an error.
    if (commit.command !== "COMMIT") throw (options.abortedError ?? defaultAborted)();
    return result;
  } catch (error) {
    if (client.getTransactionStatus() !== "I") {
      await client.query("ROLLBACK").catch((rollbackError: Error) => {
        broken ??= rollbackError;
      });
    }
    throw options.failedError?.(error, broken) ?? error;
  } finally {
    // A client whose connection failed or whose ROLLBACK failed is in an unknown state: destroy it.
    client.off("error", onConnectionError);
    client.release(broken);
  }
}
