// The LISTEN sessions of pglease's release feeds, as the server sees them.
import pg from "pg";

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
