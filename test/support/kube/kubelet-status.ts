// A pod's status as a real kubelet writes it (Kubernetes 1.35: pkg/kubelet/kubelet_pods.go
// generateAPIPodStatus, pkg/kubelet/status/generate.go, pkg/kubelet/prober/prober_manager.go), the
// one place the tests' kubelets take it from, so no stand-in writes a field where no kubelet does:
// - an init container's status is in `initContainerStatuses`, in spec order, a native sidecar's
//   (`restartPolicy: Always`) included; the others in `containerStatuses`, sorted by name;
// - `started` is true only while running (no startup probe pending); `ready` is the readiness
//   probe's verdict while running, and for a completed ordinary init container its exit code 0;
// - `containerID` is `containerd://<64 hex>`, `imageID` a digest reference;
// - conditions: those the kubelet does not own first (e.g. pglease.io/leader), then
//   PodReadyToStartContainers, Initialized, Ready, ContainersReady, PodScheduled;
//   ContainersReady counts the native sidecars' readiness with the containers', and Ready is
//   ContainersReady and every readiness gate's condition True; each carries the pod's generation
//   as observedGeneration, and so does the status (PodObservedGenerationTracking, GA in 1.35).
import type {
  V1Container,
  V1ContainerStatus,
  V1Pod,
  V1PodCondition,
  V1PodStatus,
} from "@kubernetes/client-node";

/** What the runtime and the probes say of one container; every field defaults to a running, ready one. */
export interface ContainerReport {
  /** The readiness probe's verdict (no probe: true once started). */
  ready?: boolean;
  /** false: crashed and waiting to be restarted (CrashLoopBackOff). */
  running?: boolean;
  restartCount?: number;
  startedAt?: Date;
  /**
   * How the last run that ended ended (running: false: this run; running after a restart: the run
   * before), as the kubelet reports it in `lastState.terminated`: the exit code (default 1), the
   * reason (default Error; OOMKilled), and `message`, what that run's process left in its
   * termination message file (the kubelet reads it once the runtime saw the process exit).
   */
  ended?: { exitCode?: number; reason?: string; message?: string; finishedAt?: Date };
}

const KUBELET_CONDITIONS = [
  "PodReadyToStartContainers",
  "Initialized",
  "Ready",
  "ContainersReady",
  "PodScheduled",
];

/** A native sidecar: an init container the kubelet keeps running beside the containers. */
export function isRestartableInit(container: V1Container): boolean {
  return container.restartPolicy === "Always";
}

function hex(seed: string, length: number): string {
  let out = "";
  for (let i = 0; out.length < length; i++) {
    let h = 0x811c9dc5 ^ i;
    for (const c of seed) h = Math.imul(h ^ c.charCodeAt(0), 0x01000193) >>> 0;
    out += h.toString(16).padStart(8, "0");
  }
  return out.slice(0, length);
}

function containerStatus(
  pod: V1Pod,
  container: V1Container,
  report: ContainerReport,
  now: Date,
  completedInit: boolean,
): V1ContainerStatus {
  const image = container.image ?? "registry.invalid/unknown:1";
  // A container the report does not restart keeps its run: its count and its start.
  const before = [
    ...(pod.status?.initContainerStatuses ?? []),
    ...(pod.status?.containerStatuses ?? []),
  ].find((c) => c.name === container.name);
  const restartCount = report.restartCount ?? before?.restartCount ?? 0;
  const startedAt =
    report.startedAt ??
    (restartCount === before?.restartCount
      ? (before?.state?.running?.startedAt ?? before?.state?.terminated?.startedAt)
      : undefined) ??
    now;
  // A new container ID per run: a restart in place is a new container.
  const runId = (run: number) =>
    `containerd://${hex(`${pod.metadata?.uid ?? pod.metadata?.name}/${container.name}/${run}`, 64)}`;
  const base = {
    name: container.name,
    image,
    imageID: `${image.split(":")[0]}@sha256:${hex(image, 64)}`,
    containerID: runId(restartCount),
    restartCount,
  };
  // The run that ended: this one while it waits for its restart (restartCount moves only when the
  // next run starts), else the one before; its own container ID, never the current run's.
  const endedRun = report.running === false ? restartCount : restartCount - 1;
  const lastState =
    report.running === false || (report.ended && restartCount > 0)
      ? {
          terminated: {
            exitCode: report.ended?.exitCode ?? 1,
            reason: report.ended?.reason ?? "Error",
            ...(report.ended?.message ? { message: report.ended.message } : {}),
            startedAt,
            finishedAt: report.ended?.finishedAt ?? now,
            containerID: runId(endedRun),
          },
        }
      : (before?.lastState ?? {});
  if (completedInit) {
    return {
      ...base,
      ready: true,
      started: false,
      state: {
        terminated: {
          exitCode: 0,
          reason: "Completed",
          startedAt,
          finishedAt: startedAt,
          containerID: base.containerID,
        },
      },
    };
  }
  if (report.running === false) {
    return {
      ...base,
      ready: false,
      started: false,
      state: {
        waiting: {
          reason: "CrashLoopBackOff",
          message: `back-off restarting failed container ${container.name}`,
        },
      },
      lastState,
    };
  }
  return {
    ...base,
    ready: report.ready ?? true,
    started: true,
    state: { running: { startedAt } },
    lastState,
  };
}

function condition(
  type: string,
  status: boolean,
  now: Date,
  previous: V1PodCondition[],
  generation: number | undefined,
  message?: string,
): V1PodCondition {
  const flag = status ? "True" : "False";
  const before = previous.find((c) => c.type === type);
  return {
    type,
    status: flag,
    ...(status
      ? {}
      : { reason: type === "Initialized" ? "ContainersNotInitialized" : "ContainersNotReady", message }),
    lastProbeTime: null as unknown as undefined,
    // The transition time moves only when the status does.
    lastTransitionTime:
      before?.status === flag && before.lastTransitionTime ? before.lastTransitionTime : now,
    ...(generation === undefined ? {} : { observedGeneration: generation }),
  };
}

/**
 * The status the kubelet writes for `pod` once its sandbox is up and its ordinary init containers
 * have completed: each container as `report` says (by name; absent: running and ready).
 */
export function kubeletPodStatus(
  pod: V1Pod,
  report: Record<string, ContainerReport> = {},
  now: Date = new Date(),
): V1PodStatus {
  const spec = pod.spec ?? { containers: [] };
  const previous = pod.status?.conditions ?? [];
  const generation = pod.metadata?.generation;
  const initContainers = spec.initContainers ?? [];
  const initContainerStatuses = initContainers.map((c) =>
    containerStatus(pod, c, report[c.name] ?? {}, now, !isRestartableInit(c)),
  );
  const containerStatuses = spec.containers
    .map((c) => containerStatus(pod, c, report[c.name] ?? {}, now, false))
    .sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
  const judged = [
    ...initContainers
      .filter(isRestartableInit)
      .map((c) => initContainerStatuses.find((s) => s.name === c.name)),
    ...spec.containers.map((c) => containerStatuses.find((s) => s.name === c.name)),
  ];
  const unready = judged.filter((s) => !s?.ready).map((s) => s?.name);
  const containersReady = unready.length === 0;
  const unreadyMessage = `containers with unready status: [${unready.join(" ")}]`;
  const gates = (spec.readinessGates ?? []).filter(
    (g) => previous.find((c) => c.type === g.conditionType)?.status !== "True",
  );
  const ready = containersReady && gates.length === 0;
  const readyMessage = containersReady
    ? gates
        .map((g) => `corresponding condition of pod readiness gate "${g.conditionType}" is not "True"`)
        .join(", ")
    : unreadyMessage;
  const readyCondition = condition("Ready", ready, now, previous, generation, readyMessage);
  if (!ready && containersReady) readyCondition.reason = "ReadinessGatesNotReady";
  return {
    ...pod.status,
    phase: "Running",
    ...(generation === undefined ? {} : { observedGeneration: generation }),
    conditions: [
      ...previous.filter((c) => !KUBELET_CONDITIONS.includes(c.type)),
      condition("PodReadyToStartContainers", true, now, previous, generation),
      condition("Initialized", true, now, previous, generation),
      readyCondition,
      condition("ContainersReady", containersReady, now, previous, generation, unreadyMessage),
      condition("PodScheduled", true, now, previous, generation),
    ],
    hostIP: pod.status?.hostIP ?? "10.1.0.1",
    hostIPs: pod.status?.hostIPs ?? [{ ip: "10.1.0.1" }],
    podIP: pod.status?.podIP ?? "10.2.0.10",
    podIPs: pod.status?.podIPs ?? [{ ip: "10.2.0.10" }],
    startTime: pod.status?.startTime ?? now,
    qosClass: pod.status?.qosClass ?? "BestEffort",
    ...(initContainerStatuses.length > 0 ? { initContainerStatuses } : {}),
    containerStatuses,
  };
}
