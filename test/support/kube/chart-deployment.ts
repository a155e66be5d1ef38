// The chart's Deployment as the Deployment controller and the kubelet read it: its replicas, its
// rolling-update fenceposts, the pod-template-hash of its template, the pod labels, and the
// sidecar's environment resolved for one pod (the downward API and the database Secret).
import type { V1EnvVar, V1Pod } from "@kubernetes/client-node";
import { type ChartValues, renderChart } from "./chart.ts";

export interface ChartDeployment {
  name: string;
  replicas: number;
  /** Pods the rollout may add above replicas, and take below them (as the controller resolves them). */
  maxSurge: number;
  maxUnavailable: number;
  /** The template's labels; a pod also carries pod-template-hash. */
  labels: Record<string, string>;
  podTemplateHash: string;
  /** The pglease container's env as rendered. */
  sidecarEnv: V1EnvVar[];
  /** The grace period a controller's DELETE gives the pod. */
  terminationGraceSeconds: number;
}

interface RenderedDeployment {
  metadata: { name: string };
  spec: {
    replicas: number;
    strategy?: {
      type?: string;
      rollingUpdate?: { maxSurge?: number | string; maxUnavailable?: number | string };
    };
    template: {
      metadata: { labels: Record<string, string> };
      spec: {
        terminationGracePeriodSeconds?: number;
        initContainers?: Array<{ name: string; env?: V1EnvVar[] }>;
        containers: Array<{ name: string; env?: V1EnvVar[] }>;
      };
    };
  };
}

/** intstr: a count, or a percentage of replicas rounded up (surge) or down (unavailable). */
function fencepost(value: number | string | undefined, replicas: number, roundUp: boolean): number {
  const text = String(value ?? "25%");
  if (!text.endsWith("%")) return Number(text);
  const exact = (Number(text.slice(0, -1)) * replicas) / 100;
  return roundUp ? Math.ceil(exact) : Math.floor(exact);
}

/** The controller's naming alphabet (k8s.io/apimachinery rand.SafeEncodeString): no vowels, no look-alikes. */
const SAFE = "bcdfghjklmnpqrstvwxz2456789";

/** FNV-1a of the template, encoded as the controller encodes its hash: equal templates, equal hashes. */
export function templateHash(template: unknown): string {
  let hash = 0x811c9dc5;
  for (const byte of Buffer.from(JSON.stringify(template))) {
    hash ^= byte;
    hash = Math.imul(hash, 0x01000193) >>> 0;
  }
  return [...String(hash)].map((c) => SAFE[c.charCodeAt(0) % SAFE.length]).join("");
}

/** helm template of the chart's Deployment with `values` (3 replicas unless they say otherwise). */
export async function renderChartDeployment(values: ChartValues = {}): Promise<ChartDeployment> {
  const manifests = await renderChart({ workload: { replicas: 3 }, ...values });
  const deployment = manifests.find((m) => m.kind === "Deployment") as unknown as RenderedDeployment;
  if (!deployment) throw new Error("the chart rendered no Deployment");
  const { spec } = deployment;
  const sidecar = [...(spec.template.spec.initContainers ?? []), ...spec.template.spec.containers].find(
    (c) => c.name === "pglease",
  );
  if (!sidecar) throw new Error("the chart's Deployment has no pglease container");
  const rolling = spec.strategy?.type === "Recreate" ? null : spec.strategy?.rollingUpdate;
  if (rolling === null) throw new Error("the chart's Deployment is not a rolling update");
  const maxSurge = fencepost(rolling?.maxSurge, spec.replicas, true);
  const unavailable = fencepost(rolling?.maxUnavailable, spec.replicas, false);
  return {
    name: deployment.metadata.name,
    replicas: spec.replicas,
    maxSurge,
    // Both zero would never progress: the controller then allows one unavailable.
    maxUnavailable: maxSurge === 0 && unavailable === 0 ? 1 : unavailable,
    labels: spec.template.metadata.labels,
    podTemplateHash: templateHash(spec.template),
    sidecarEnv: sidecar.env ?? [],
    terminationGraceSeconds: spec.template.spec.terminationGracePeriodSeconds ?? 30,
  };
}

/** The kubelet's view of a fieldRef path on `pod`: a missing label is the empty string. */
function fieldOf(pod: V1Pod, path: string): string {
  const label = /^metadata\.labels\['(.+)'\]$/.exec(path)?.[1];
  if (label !== undefined) return pod.metadata?.labels?.[label] ?? "";
  const fields: Record<string, string | undefined> = {
    "metadata.name": pod.metadata?.name,
    "metadata.namespace": pod.metadata?.namespace,
    "metadata.uid": pod.metadata?.uid,
  };
  if (!(path in fields)) throw new Error(`the kubelet here does not resolve fieldRef ${path}`);
  return fields[path] ?? "";
}

/** The sidecar's environment in `pod`, as the kubelet resolves it; `secrets` by key. */
export function sidecarEnvironment(
  deployment: ChartDeployment,
  pod: V1Pod,
  secrets: Record<string, string>,
): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const v of deployment.sidecarEnv) {
    const ref = v.valueFrom;
    if (ref?.fieldRef) env[v.name] = fieldOf(pod, ref.fieldRef.fieldPath);
    else if (ref?.secretKeyRef) env[v.name] = secrets[ref.secretKeyRef.key];
    else if (!ref) env[v.name] = v.value ?? "";
    else throw new Error(`the kubelet here does not resolve ${v.name}'s source`);
  }
  return env;
}
