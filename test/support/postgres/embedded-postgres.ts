// The demo's embedded PostgreSQL, as the tests and the bench use it, plus what only tests need:
// a restart on the same data directory and port, like a crash or a fast shutdown.
import {
  EmbeddedPostgresMissing,
  type EmbeddedServer,
  freePort,
  startEmbeddedPostgres as startDemoPostgres,
} from "../../../src/cli/demo/embedded-postgres.ts";

export { EmbeddedPostgresMissing, type EmbeddedServer, freePort };

export type RestartMode = "fast" | "immediate";

export interface RestartableServer extends EmbeddedServer {
  /**
   * Stops the server and starts it again on the same data directory and port. "fast" (default)
   * disconnects clients and checkpoints; "immediate" stops like a crash and recovers from the WAL.
   * `downMs` keeps it stopped that long before the start.
   */
  restart(options?: { mode?: RestartMode; downMs?: number }): Promise<void>;
}

const STOP_BOUND_MS = 10_000;

export async function startEmbeddedPostgres(
  options?: Parameters<typeof startDemoPostgres>[0],
): Promise<RestartableServer> {
  const server = await startDemoPostgres(options);
  let stopped = false;
  return {
    get url() {
      return server.url;
    },
    get port() {
      return server.port;
    },
    get dir() {
      return server.dir;
    },
    get pid() {
      return server.pid;
    },
    get postmaster() {
      return server.postmaster;
    },
    start: () => server.start(),
    stop: () => {
      stopped = true;
      return server.stop();
    },
    async restart({ mode = "fast", downMs = 0 } = {}) {
      if (stopped) throw new Error("embedded PostgreSQL: restart() after stop()");
      const child = server.postmaster;
      if (child && child.exitCode === null && child.signalCode === null) {
        const gone = new Promise<void>((resolve) => child.once("exit", () => resolve()));
        // SIGINT: fast shutdown; SIGQUIT: immediate shutdown, recovered from the WAL at the next start.
        child.kill(mode === "fast" ? "SIGINT" : "SIGQUIT");
        const bound = new Promise<void>((resolve) => setTimeout(resolve, STOP_BOUND_MS).unref());
        await Promise.race([gone, bound]);
        if (child.exitCode === null && child.signalCode === null) {
          child.kill("SIGKILL");
          await gone;
        }
      }
      if (downMs > 0) await new Promise((resolve) => setTimeout(resolve, downMs));
      await server.start();
    },
  };
}
