// How a failed publishing pass is logged: each kind at the level it deserves, naming the fix
// where there is one, and the same failure again only every 20th time, so a long outage does
// not flood the log.
import type { Logger } from "pino";
import { KubeRequestError, permissionName } from "./pod-api.ts";
import { type PublishConfig, PublishConfigError } from "./publish-config.ts";
import { AwaitingRenew, NoLongerLeads } from "./reconcile.ts";

/** Logs failed passes without flooding: the same error again is logged every 20th time. */
export function failureLog(logger: Logger, config: PublishConfig) {
  let lastLogged = "";
  return {
    failed(error: unknown, failures: number): string {
      const message = error instanceof Error ? error.message : String(error);
      if (message !== lastLogged || failures % 20 === 0) logFailure(logger, config, error, failures);
      lastLogged = message;
      return message;
    },
    recovered(failures: number): void {
      if (failures > 0) logger.info({ failures }, "pod publishing recovered");
      lastLogged = "";
    },
  };
}

function logFailure(logger: Logger, config: PublishConfig, error: unknown, failures: number): void {
  if (error instanceof PublishConfigError) {
    logger.error({ failures, field: error.field }, error.message);
  } else if (error instanceof NoLongerLeads || error instanceof AwaitingRenew) {
    logger.debug({ failures }, error.message);
  } else if (!(error instanceof KubeRequestError)) {
    logger.error({ err: error, failures }, "pod publishing failed unexpectedly; retrying");
  } else if (error.kind === "forbidden") {
    logger.error(
      { failures, permission: permissionName(error.permission) },
      `missing permission: ${permissionName(error.permission)} in namespace ${config.namespace}; grant it in the Role bound to this pod's service account (retrying)`,
    );
  } else if (error.kind === "conflict") {
    logger.debug({ failures }, "pod changed under a patch (409); re-reading and retrying");
  } else {
    logger.warn({ failures, err: error.message }, "pod publishing failed; retrying with backoff");
  }
}
