// At start, ask the API server (SelfSubjectAccessReview) whether the Role grants every verb
// publishing needs, so a missing one is one clear error up front instead of a 403 buried in
// retries later. An API server that cannot answer is not a reason to stop: say so and go on.
import type { Logger } from "../shared/logger.ts";
import { PERMISSIONS, type PodApi, permissionName } from "./pod-api.ts";

/** The permissions the Role lacks, by name ("patch pods/status"); empty when all are granted or unknown. */
export async function checkPermissions(api: PodApi, namespace: string, logger: Logger): Promise<string[]> {
  const required = Object.values(PERMISSIONS);
  let answers: boolean[];
  try {
    answers = await Promise.all(required.map((permission) => api.allowed(permission)));
  } catch (error) {
    logger.warn(
      { err: error instanceof Error ? error.message : String(error) },
      "could not check this pod's RBAC permissions (SelfSubjectAccessReview); continuing without the check",
    );
    return [];
  }
  const missing = required.filter((_, i) => !answers[i]).map(permissionName);
  if (missing.length > 0) {
    logger.error(
      { missing, namespace },
      `missing RBAC permissions in namespace ${namespace}: ${missing.join(", ")}; pod publishing cannot work until the Role bound to this pod's service account grants them`,
    );
  }
  return missing;
}
