// The client-go side of the real-cluster group: a Deployment shaped like the chart's (same replicas,
// the same application container, the Kubernetes default rolling update, 30 s grace) whose pods
// each run test/kube-cluster-go/client-go-labeller beside the application: client-go's Lease
// election with ReleaseOnCancel, labelling its own pod leader in OnStartedLeading and unlabelling
// it in OnStoppedLeading, as Lease-based labelling sidecars do. A Service selects the label, as the
// chart's leader Service selects pglease.io/role=leader.
import type { Image } from "../../test/cluster/images.ts";
import type { ClusterSession } from "../../test/cluster/session.ts";
import type { PeerTiming } from "../peers/systems.ts";
import type { Workload } from "./handover-trials.ts";

const NAME = "orders-client-go";
const LEADER_LABEL = ["labeller.example/role", "leader"] as const;
const APP_PORT = 8080;

const downward = (name: string, fieldPath: string) => ({ name, valueFrom: { fieldRef: { fieldPath } } });

function manifests(
  namespace: string,
  replicas: number,
  app: { image: string; command: string[] },
  labeller: Image,
  timing: PeerTiming,
) {
  const selector = { "app.kubernetes.io/name": "client-go-labeller", "app.kubernetes.io/instance": "orders" };
  const metadata = { name: NAME, namespace };
  return [
    { apiVersion: "v1", kind: "ServiceAccount", metadata },
    {
      apiVersion: "rbac.authorization.k8s.io/v1",
      kind: "Role",
      metadata,
      rules: [
        // What client-go's LeaseLock does: read, create and update its Lease.
        { apiGroups: ["coordination.k8s.io"], resources: ["leases"], verbs: ["get", "create", "update"] },
        // The labeller patches its own pod's labels.
        { apiGroups: [""], resources: ["pods"], verbs: ["get", "patch"] },
      ],
    },
    {
      apiVersion: "rbac.authorization.k8s.io/v1",
      kind: "RoleBinding",
      metadata,
      roleRef: { apiGroup: "rbac.authorization.k8s.io", kind: "Role", name: NAME },
      subjects: [{ kind: "ServiceAccount", name: NAME, namespace }],
    },
    {
      apiVersion: "apps/v1",
      kind: "Deployment",
      metadata,
      spec: {
        replicas,
        selector: { matchLabels: selector },
        template: {
          metadata: { labels: selector },
          spec: {
            serviceAccountName: NAME,
            terminationGracePeriodSeconds: 30,
            containers: [
              {
                name: "app",
                image: app.image,
                imagePullPolicy: "IfNotPresent",
                command: app.command,
                env: [downward("POD_NAME", "metadata.name")],
                ports: [{ name: "http", containerPort: APP_PORT }],
              },
              {
                name: "labeller",
                image: labeller.reference,
                imagePullPolicy: "IfNotPresent",
                args: [
                  "--lease",
                  NAME,
                  "--label",
                  LEADER_LABEL.join("="),
                  "--lease-duration",
                  String(timing.leaseMs),
                  "--renew-deadline",
                  String(timing.renewDeadlineMs),
                  "--retry-period",
                  String(timing.retryMs),
                ],
                env: [downward("POD_NAME", "metadata.name"), downward("POD_NAMESPACE", "metadata.namespace")],
              },
            ],
          },
        },
      },
    },
    {
      apiVersion: "v1",
      kind: "Service",
      metadata: { name: `${NAME}-leader`, namespace },
      spec: {
        selector: { ...selector, [LEADER_LABEL[0]]: LEADER_LABEL[1] },
        ports: [{ name: "http", port: 80, targetPort: "http" }],
      },
    },
  ];
}

/** Creates the workload in `namespace` (which exists); answers it for the trials. */
export async function applyLabellerWorkload(
  session: ClusterSession,
  namespace: string,
  replicas: number,
  app: { image: string; command: string[] },
  labeller: Image,
  timing: PeerTiming,
): Promise<Workload> {
  const list = {
    apiVersion: "v1",
    kind: "List",
    items: manifests(namespace, replicas, app, labeller, timing),
  };
  await session.kubectl(["apply", "-f", "-"], JSON.stringify(list));
  return {
    namespace,
    selector: "app.kubernetes.io/name=client-go-labeller,app.kubernetes.io/instance=orders",
    leaderService: `${NAME}-leader`,
    deployment: NAME,
    replicas,
  };
}
