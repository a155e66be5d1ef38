// `pglease run`: the sidecar a pod runs, and its shutdown: the first SIGTERM (or SIGINT)
// stops gracefully within the grace period; a second one, or the period running out, exits at once.
// Either way the last log lines (why it stopped) go out first, to a log reader that is behind.
import { optionHelp } from "../config/options.ts";
import { readRunConfig } from "../config/run-config.ts";
import { RUN_OPTIONS } from "../config/run-options.ts";
import { StartAborted } from "../leases/open-leases.ts";
import { createLogger, flushed, secretsFrom } from "../observability/logger.ts";
import { type Sidecar, startSidecar } from "../sidecar/sidecar.ts";
import { explainDatabaseError } from "./database-errors.ts";

export const RUN_HELP = `Usage: pglease run --lease NAME [flags]

Campaigns for the named lease(s) in PostgreSQL, renews while leading, and shows the
role on this pod (label, condition, fence annotation, events) when it runs in
Kubernetes with POD_NAME and POD_NAMESPACE set. Serves /healthz, /readyz, /leader,
/status and /metrics on --http-addr.

Database: DATABASE_URL, or PGHOST, PGPORT, PGDATABASE, PGUSER, PGPASSWORD, PGSSLMODE.
Every flag has an environment variable, shown in brackets; a flag wins over it.
Durations as Go writes them, and d for days: 500ms, 15s, 1m30s, 1.5h, 30d.

Flags:
${optionHelp(RUN_OPTIONS)}

Examples:
  DATABASE_URL=postgres://app:secret@db:5432/app pglease run --lease orders-sync
  pglease run --lease orders-sync,billing --duration 10s --http-addr 127.0.0.1:8484
  PGLEASE_LEASE=orders-sync PGLEASE_NOTIFY=false pglease run   # behind PgBouncer (transaction mode)
`;

/**
 * How long an exit waits for stdout to hand the OS the lines still queued for a log reader that is
 * behind (a container's stdout is a pipe to the runtime's log shim). A reader that is merely slow
 * catches up well within it; one that has stalled must not keep a stopping sidecar alive. The
 * kubelet's SIGKILL comes at the end of the pod's terminationGracePeriodSeconds, which the chart
 * keeps above the grace period (by 10 s with its defaults); where less than this is left, the
 * SIGKILL only cuts the wait short.
 */
const EXIT_FLUSH_MS = 1000;

export async function runCommand(argv: readonly string[], env: NodeJS.ProcessEnv): Promise<number> {
  const config = readRunConfig(argv, env);
  const logger = createLogger(config.logLevel, secretsFrom(env));
  const startup = new AbortController();
  let sidecar: Sidecar | null = null;
  let signals = 0;
  let finish: (code: number) => void = () => {};
  const finished = new Promise<number>((resolve) => {
    finish = resolve;
  });
  // Set by the one forced exit, so a late signal or the grace timer cannot start another.
  let exiting = false;
  // process.exit drops what stdout still queues: the lines that say why go out first, within the bound.
  const exitNow = (code: number) => {
    exiting = true;
    void flushed(process.stdout, EXIT_FLUSH_MS).then(() => process.exit(code));
  };
  const stopGracefully = (running: Sidecar) => {
    const force = setTimeout(() => {
      if (exiting) return;
      logger.error(`graceful stop did not finish within ${config.gracePeriodMs} ms: exiting`);
      exitNow(1);
    }, config.gracePeriodMs);
    force.unref();
    running.stop().then(
      () => {
        clearTimeout(force);
        finish(0);
      },
      (error: unknown) => {
        logger.error({ err: String(error) }, "graceful stop failed");
        finish(1);
      },
    );
  };
  const onSignal = (signal: NodeJS.Signals) => {
    if (exiting) return;
    signals++;
    if (signals > 1) {
      logger.warn(`second ${signal}: exiting now without finishing the graceful stop`);
      exitNow(130);
      return;
    }
    if (!sidecar) {
      logger.info(`${signal} before start-up finished: stopping`);
      startup.abort();
      return;
    }
    logger.info(`${signal}: stopping leader work, demoting the pod, releasing the lease`);
    stopGracefully(sidecar);
  };
  process.on("SIGTERM", onSignal);
  process.on("SIGINT", onSignal);
  // A stop that finished returns, and Node writes out stdout before it exits; but not past the
  // bound for a log reader that has stalled. It leaves the grace timer armed: after a failed stop,
  // something may still hold the process open.
  const exitWhenFlushed = async (code: number) => {
    if (!(await flushed(process.stdout, EXIT_FLUSH_MS))) process.exit(code);
    return code;
  };
  try {
    sidecar = await startSidecar({ config, logger, signal: startup.signal });
  } catch (error) {
    if (error instanceof StartAborted) return exitWhenFlushed(0);
    throw explainDatabaseError(error, {
      connectionString: config.database.connectionString,
      callTimeoutMs: config.timing.callTimeoutMs,
    });
  }
  // A signal that arrived while the last start-up attempt was finishing.
  if (startup.signal.aborted) stopGracefully(sidecar);
  return exitWhenFlushed(await finished);
}
