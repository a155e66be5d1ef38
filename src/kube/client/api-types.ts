// The few shapes of the Kubernetes API that pglease reads and writes, as the API server sends them
// (JSON, timestamps as strings). Only the fields pglease uses; everything else passes through.

export interface ObjectMeta {
  name?: string;
  namespace?: string;
  uid?: string;
  resourceVersion?: string;
  labels?: Record<string, string>;
  annotations?: Record<string, string>;
  /** Set once the pod is being deleted; a string from the server (a Date from other clients). */
  deletionTimestamp?: unknown;
}

export interface PodCondition {
  type: string;
  status: string;
  reason?: string;
  message?: string;
  /** A string from the server; typed loosely so pods built by other clients (Date) fit too. */
  lastTransitionTime?: unknown;
}

export interface Pod {
  apiVersion?: string;
  kind?: string;
  metadata?: ObjectMeta;
  status?: {
    conditions?: PodCondition[];
    containerStatuses?: ContainerStatus[];
    /** The init containers', a native sidecar's (`restartPolicy: Always`) among them. */
    initContainerStatuses?: ContainerStatus[];
  };
}

/** What the kubelet reports of one container: `ready` is its readiness probe's verdict. */
export interface ContainerStatus {
  name: string;
  ready: boolean;
  restartCount?: number;
  state?: ContainerState;
  /** The run before this one, once it ended: its termination, with the message its process left. */
  lastState?: ContainerState;
}

export interface ContainerState {
  running?: unknown;
  waiting?: { reason?: string };
  terminated?: { reason?: string; exitCode?: number; containerID?: string; message?: string };
}

export interface PodList {
  metadata?: { resourceVersion?: string };
  items: Pod[];
}

export interface CoreEvent {
  apiVersion: "v1";
  kind: "Event";
  metadata: ObjectMeta;
  involvedObject: { apiVersion: string; kind: string; name: string; namespace: string; uid?: string };
  reason: string;
  message: string;
  type: "Normal" | "Warning";
  source: { component: string };
  reportingComponent: string;
  reportingInstance: string;
  firstTimestamp: string;
  lastTimestamp: string;
  count: number;
}

/** The body of an error answer (and of a watch ERROR event). */
export interface Status {
  kind?: "Status";
  code?: number;
  reason?: string;
  message?: string;
  /** A 422's causes name the fields refused, e.g. metadata.uid for a patch pinned to another pod. */
  details?: { causes?: Array<{ field?: string; reason?: string; message?: string }> };
}

export interface WatchEvent {
  type: "ADDED" | "MODIFIED" | "DELETED" | "BOOKMARK" | "ERROR";
  object: Pod & Status;
}
