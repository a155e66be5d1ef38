// How a failed publishing pass is logged: each kind at the level it deserves, naming the fix
// where there is one, and a failure already logged in this run of failures again only every 20th
// time, so a long outage does not flood the log.
import type { Logger } from "../shared/logger.ts";
import { KubeRequestError, permissionName } from "./pod-api.ts";
import { type PublishConfig, PublishConfigError } from "./publish-config.ts";
import { AwaitingRenew, NoLongerLeads } from "./reconcile.ts";

/**
 * Logs failed passes without flooding: a failure is logged the first time it comes in a run of
 * failures, and whatever fails on every 20th pass. A set, not the last one: a pass sends the label
 * and the condition patch at once, and a refusal of both ends it with whichever answered first.
 */
export function failureLog(logger: Logger, config: PublishConfig) {
  let logged = new Set<string>();
  return {
    failed(error: unknown, failures: number): string {
      const message = error instanceof Error ? error.message : String(error);
      // Cleared on every 20th pass, so it holds at most 20 messages.
      if (failures % 20 === 0) logged = new Set();
      if (!logged.has(message)) logFailure(logger, config, error, failures);
      logged.add(message);
      return message;
    },
    recovered(failures: number): void {
      if (failures > 0) logger.info({ failures }, "pod publishing recovered");
      logged = new Set();
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
  } else if (error.kind === "denied") {
    // Admission runs after the authorizer: RBAC allowed this, so its Role is not the fix.
    logger.error(
      { failures, permission: permissionName(error.permission), status: error.status },
      `${permissionName(error.permission)} refused by admission in namespace ${config.namespace}: ${error.serverMessage ?? error.message}; RBAC allows it, the Role is not the fix: correct the ValidatingAdmissionPolicy (or webhook) named here or its binding; with the pglease-sidecar chart's policy, admissionPolicy.podLabels must be labels this pod has (docs/runbook.md, PgleasePublishFailures; retrying)`,
    );
  } else if (error.kind === "refused") {
    // No Status to read: RBAC and admission are both suspects, and so is a proxy.
    logger.error(
      { failures, permission: permissionName(error.permission), status: error.status },
      `${permissionName(error.permission)} forbidden in namespace ${config.namespace} by the API server or a proxy in front of it, with no reason given (${error.message}); check the Role bound to this pod's service account and any admission policy, and any proxy between this pod and the API server (retrying)`,
    );
  } else if (error.kind === "conflict") {
    logger.debug({ failures }, "pod changed under a patch (409); re-reading and retrying");
  } else {
    logger.warn({ failures, err: error.message }, "pod publishing failed; retrying with backoff");
  }
}
