// What a cluster would hold around pglease, put onto the real API server as its admin: a namespace
// with the chart's ServiceAccount, Role and RoleBinding (rendered by helm, so the tests run under
// exactly what the chart grants), a real token for that ServiceAccount, and pods whose status the
// test writes as the kubelet would.
import {
  AdmissionregistrationV1Api,
  AuthenticationV1Api,
  AuthorizationV1Api,
  CoreV1Api,
  type CoreV1Event,
  KubeConfig,
  RbacAuthorizationV1Api,
  type V1Pod,
  type V1Role,
} from "@kubernetes/client-node";
import { ADMISSION_POLICY_API, type ChartValues, isHelmHook, renderChart } from "./chart.ts";
import { kubeletPodStatus } from "./kubelet-status.ts";

export interface ChartIdentity {
  /** The ServiceAccount's bearer token, from the TokenRequest API. */
  token: string;
  /** The RoleBinding's name. */
  binding: string;
  /** As the API server names it in a 403: system:serviceaccount:<namespace>:<name>. */
  user: string;
  /** The Role as the chart renders it (namespace set). */
  role: V1Role;
}

function isConflict(error: unknown): boolean {
  return (error as { code?: number }).code === 409;
}

/**
 * Creates the namespace (with the "default" ServiceAccount the ServiceAccount admission plugin
 * wants for pods, which no controller-manager creates here) and the chart's RBAC objects in it.
 */
export async function installChartRbac(
  admin: KubeConfig,
  namespace: string,
  values: ChartValues = {},
  options: InstallOptions = {},
): Promise<ChartIdentity> {
  const core = admin.makeApiClient(CoreV1Api);
  const rbac = admin.makeApiClient(RbacAuthorizationV1Api);
  await core.createNamespace({ body: { metadata: { name: namespace } } }).catch((error) => {
    if (!isConflict(error)) throw error;
  });
  await core
    .createNamespacedServiceAccount({ namespace, body: { metadata: { name: "default" } } })
    .catch((error) => {
      if (!isConflict(error)) throw error;
    });
  const apiVersions = options.admissionPolicy ? [ADMISSION_POLICY_API] : [];
  const manifests = (await renderChart(values, { namespace, release: options.release, apiVersions })).filter(
    (m) => !isHelmHook(m),
  );
  const pick = (kind: string) => {
    const found = manifests.filter((m) => m.kind === kind);
    if (found.length !== 1) throw new Error(`expected one ${kind} from the chart, found ${found.length}`);
    return { ...found[0], metadata: { ...found[0]?.metadata, namespace } } as never;
  };
  const serviceAccount = pick("ServiceAccount") as { metadata: { name: string } };
  const role = pick("Role") as V1Role;
  await core.createNamespacedServiceAccount({ namespace, body: serviceAccount });
  await rbac.createNamespacedRole({ namespace, body: role });
  const binding = pick("RoleBinding");
  await rbac.createNamespacedRoleBinding({ namespace, body: binding });
  const request = await core.createNamespacedServiceAccountToken({
    namespace,
    name: serviceAccount.metadata.name,
    body: { spec: { audiences: [], expirationSeconds: 3_600 } },
  });
  const token = request.status?.token;
  if (!token) throw new Error("the TokenRequest API returned no token");
  if (options.admissionPolicy) {
    const admission = admin.makeApiClient(AdmissionregistrationV1Api);
    const policy = pick("ValidatingAdmissionPolicy") as { spec: { validations: { reason?: string }[] } };
    if (options.withoutReasons) for (const validation of policy.spec.validations) delete validation.reason;
    await admission.createValidatingAdmissionPolicy({ body: policy as never });
    await admission.createValidatingAdmissionPolicyBinding({
      body: pick("ValidatingAdmissionPolicyBinding"),
    });
    await awaitAdmissionPolicy(admin, namespace, token);
  }
  return {
    token,
    binding: (binding as { metadata: { name: string } }).metadata.name,
    user: `system:serviceaccount:${namespace}:${serviceAccount.metadata.name}`,
    role,
  };
}

/**
 * What `helm uninstall` does to the chart's identity while the pods still stop: the RoleBinding,
 * the Role and the ServiceAccount deleted. Returns once the API server refuses the token (the
 * ServiceAccount token authenticator reads ServiceAccounts through an informer).
 */
export async function uninstallChartRbac(
  admin: KubeConfig,
  namespace: string,
  identity: ChartIdentity,
): Promise<void> {
  const rbac = admin.makeApiClient(RbacAuthorizationV1Api);
  const core = admin.makeApiClient(CoreV1Api);
  await rbac.deleteNamespacedRoleBinding({ namespace, name: identity.binding });
  await rbac.deleteNamespacedRole({ namespace, name: identity.role.metadata?.name ?? "" });
  await core.deleteNamespacedServiceAccount({ namespace, name: identity.user.split(":").at(-1) ?? "" });
  const review = admin.makeApiClient(AuthenticationV1Api);
  const deadline = Date.now() + 10_000;
  while (
    (await review.createTokenReview({ body: { spec: { token: identity.token } } })).status?.authenticated
  ) {
    if (Date.now() > deadline) throw new Error("the deleted ServiceAccount's token is still accepted");
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

export interface InstallOptions {
  /** The release name helm renders with (default "pglease"): the policy's pod labels follow it. */
  release?: string;
  /** Also install the chart's ValidatingAdmissionPolicy and binding, and wait until they are enforced. */
  admissionPolicy?: boolean;
  /**
   * The policy's validations without their `reason` (Forbidden in the chart), as a policy that
   * names none: the API server then refuses with 422 Invalid instead of 403.
   */
  withoutReasons?: boolean;
}

/**
 * Returns once the API server enforces the new policy: it loads policies and bindings through
 * informers and compiles them, so a request sent right after the create could still pass. Asks
 * with the token, as a dry run, for a change the policy refuses, on a pod of no workload.
 */
async function awaitAdmissionPolicy(admin: KubeConfig, namespace: string, token: string): Promise<void> {
  const name = "pglease-policy-probe";
  await createRunningPod(admin, namespace, { metadata: { name, labels: { probe: "true" } } });
  const asAccount = new KubeConfig();
  const cluster = admin.getCurrentCluster();
  if (!cluster) throw new Error("the admin kubeconfig has no cluster");
  asAccount.loadFromOptions({
    clusters: [cluster],
    users: [{ name: "account", token }],
    contexts: [{ name: "account", cluster: cluster.name, user: "account" }],
    currentContext: "account",
  });
  const core = asAccount.makeApiClient(CoreV1Api);
  const deadline = Date.now() + 30_000;
  try {
    for (;;) {
      const refused = await core
        .patchNamespacedPod({
          namespace,
          name,
          dryRun: "All",
          body: [{ op: "add", path: "/metadata/labels/probed", value: "true" }],
        })
        .then(
          () => false,
          (error) =>
            String((error as { body?: unknown }).body ?? error).includes("ValidatingAdmissionPolicy"),
        );
      if (refused) return;
      if (Date.now() > deadline) throw new Error("the admission policy is still not enforced after 30 s");
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
  } finally {
    await deleteRealPod(admin, namespace, name, 0);
  }
}

/**
 * Replaces the Role and returns once the authorizer answers by it: RBAC reads Roles through an
 * informer, so a request sent right after the write could still be judged by the old rules.
 */
export async function replaceRole(admin: KubeConfig, user: string, role: V1Role): Promise<void> {
  const namespace = role.metadata?.namespace ?? "";
  const name = role.metadata?.name ?? "";
  const rbac = admin.makeApiClient(RbacAuthorizationV1Api);
  const current = await rbac.readNamespacedRole({ namespace, name });
  const oldRules = current.rules ?? [];
  await rbac.replaceNamespacedRole({
    namespace,
    name,
    body: { ...role, metadata: { ...role.metadata, resourceVersion: current.metadata?.resourceVersion } },
  });
  const review = admin.makeApiClient(AuthorizationV1Api);
  const checks = [...oldRules, ...(role.rules ?? [])].flatMap((rule) =>
    (rule.apiGroups ?? [""]).flatMap((group) =>
      (rule.resources ?? []).flatMap((resource) => rule.verbs.map((verb) => ({ group, resource, verb }))),
    ),
  );
  const granted = (check: (typeof checks)[number]) =>
    (role.rules ?? []).some(
      (r) =>
        (r.apiGroups ?? [""]).includes(check.group) &&
        (r.resources ?? []).includes(check.resource) &&
        r.verbs.includes(check.verb),
    );
  const deadline = Date.now() + 10_000;
  for (const check of checks) {
    const [resource, subresource] = check.resource.split("/");
    for (;;) {
      const answer = await review.createSubjectAccessReview({
        body: {
          spec: {
            user,
            groups: ["system:serviceaccounts", `system:serviceaccounts:${namespace}`, "system:authenticated"],
            resourceAttributes: { namespace, group: check.group, resource, subresource, verb: check.verb },
          },
        },
      });
      if (answer.status?.allowed === granted(check)) break;
      if (Date.now() > deadline)
        throw new Error(`RBAC still judges ${JSON.stringify(check)} by the old Role`);
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
  }
}

/**
 * Creates the pod as the admin, then reports on it as the kubelet would: the given status, or the
 * one a kubelet writes once every container runs (kubelet-status.ts). The name and one container
 * ("app") are filled when missing, as the in-process server's seedPod does.
 */
export async function createRunningPod(admin: KubeConfig, namespace: string, pod: V1Pod): Promise<V1Pod> {
  const core = admin.makeApiClient(CoreV1Api);
  const name = pod.metadata?.name;
  if (!name) throw new Error("seedPod: metadata.name is required");
  const containers = pod.spec?.containers?.length
    ? pod.spec.containers
    : [{ name: "app", image: "registry.invalid/app:1" }];
  const created = await core.createNamespacedPod({
    namespace,
    body: {
      metadata: { ...pod.metadata, namespace },
      // Bound to a node, as the scheduler would have done: the kubelet's status follows.
      spec: { nodeName: "node-1", ...pod.spec, containers },
    },
  });
  // The kubelet's status write. Another writer may change the pod first (a running sidecar's
  // patch): the replace on the stale version is refused (409) and, like the kubelet, it reads the
  // pod again and writes once more.
  for (let attempt = 1; ; attempt++) {
    const current = attempt === 1 ? created : await core.readNamespacedPod({ namespace, name });
    const status = pod.status ? { ...current.status, ...pod.status } : kubeletPodStatus(current);
    try {
      return await core.replaceNamespacedPodStatus({ namespace, name, body: { ...current, status } });
    } catch (error) {
      if (attempt >= 5 || (error as { code?: number }).code !== 409) throw error;
    }
  }
}

export async function deleteRealPod(
  admin: KubeConfig,
  namespace: string,
  name: string,
  gracePeriodSeconds: number,
): Promise<void> {
  await admin.makeApiClient(CoreV1Api).deleteNamespacedPod({ namespace, name, gracePeriodSeconds });
}

export async function readPod(
  admin: KubeConfig,
  namespace: string,
  name: string,
): Promise<V1Pod | undefined> {
  return admin
    .makeApiClient(CoreV1Api)
    .readNamespacedPod({ namespace, name })
    .catch((error) => {
      if ((error as { code?: number }).code === 404) return undefined;
      throw error;
    });
}

/**
 * Another actor's write (kubectl, the kubelet): the pod as changed goes back by PUT, metadata and
 * spec to the pod, status to pods/status, each only when it changed.
 */
export async function mutateRealPod(
  admin: KubeConfig,
  namespace: string,
  name: string,
  change: (pod: V1Pod) => void,
): Promise<V1Pod> {
  const core = admin.makeApiClient(CoreV1Api);
  let pod = await core.readNamespacedPod({ namespace, name });
  const before = structuredClone(pod);
  change(pod);
  const same = (a: unknown, b: unknown) => JSON.stringify(a) === JSON.stringify(b);
  const { status } = pod;
  if (!same(before.metadata, pod.metadata) || !same(before.spec, pod.spec)) {
    pod = await core.replaceNamespacedPod({ namespace, name, body: pod });
  }
  if (!same(before.status, status)) {
    pod = await core.replaceNamespacedPodStatus({ namespace, name, body: { ...pod, status } });
  }
  return pod;
}

export async function readEvents(admin: KubeConfig, namespace: string): Promise<CoreV1Event[]> {
  return (await admin.makeApiClient(CoreV1Api).listNamespacedEvent({ namespace })).items;
}

/** What one test left in the namespace: its pods (gone at once, no kubelet to wait for) and Events. */
export async function emptyNamespace(admin: KubeConfig, namespace: string): Promise<void> {
  const core = admin.makeApiClient(CoreV1Api);
  await core.deleteCollectionNamespacedPod({ namespace, gracePeriodSeconds: 0 });
  await core.deleteCollectionNamespacedEvent({ namespace });
}
