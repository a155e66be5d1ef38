// One test API server (real or in-process, see test/support/kube/kube-servers.ts), one seeded pod with
// the kubelet's conditions, and a publisher with fast, injectable timings; logs and hook calls are
// captured so tests can assert on them.
import type { V1Pod, V1PolicyRule } from "@kubernetes/client-node";
import type { Pod } from "../../src/kube/client/api-types.ts";
import { kubeconfigTextConnection } from "../../src/kube/client/kubeconfig.ts";
import type { LeadershipState } from "../../src/kube/desired-state.ts";
import { createPodPublisher } from "../../src/kube/pod-publisher.ts";
import { type PublishConfigInput, validatePublishConfig } from "../../src/kube/publish-config.ts";
import type {
  PatchObservation,
  PodPublisher,
  PublishedObservation,
  PublishTiming,
} from "../../src/kube/publisher-contract.ts";
import { createLogger } from "../../src/observability/logger.ts";
import type { Clock } from "../../src/shared/clock.ts";
import type { KubeServerKind, StartOptions, TestKube } from "../support/kube/kube-servers.ts";
import { ManualClock } from "../support/manual-clock.ts";

export const NAMESPACE = "shop";
export const POD = "orders-0";
export const APP_LABELS = { "app.kubernetes.io/name": "orders", "app.kubernetes.io/instance": "prod" };

// The request timeout stays generous: a loaded two-core host can take a few hundred ms for a
// cold first request, and a spurious timeout would add a retry that tests counting requests see.
// Tests about hung requests set a short one themselves.
export const FAST: PublishTiming = {
  requestTimeoutMs: 2_000,
  backoff: { initialMs: 10, maxMs: 80 },
  startTimeoutMs: 3_000,
  eventAttempts: 3,
};

export function follower(holder = ""): LeadershipState {
  return { lease: "orders-sync", role: "follower", fence: null, holder };
}

export function leader(fence: number): LeadershipState {
  return { lease: "orders-sync", role: "leader", fence, holder: `${POD}-a1b2` };
}

export interface LogLine {
  level: "trace" | "debug" | "info" | "warn" | "error" | "fatal";
  msg: string;
  [key: string]: unknown;
}

export interface Harness {
  server: TestKube;
  publisher: PodPublisher;
  logs: LogLine[];
  patches: PatchObservation[];
  published: PublishedObservation[];
  /** The pod as the server holds it now. */
  pod(name?: string): Promise<V1Pod>;
  /** Creates another publisher on the same server (same pod unless `config.podName` says otherwise). */
  another(config?: PublishConfigInput): PodPublisher;
  close(): Promise<void>;
}

export interface HarnessOptions {
  /** The Role's rules; the chart's when omitted. */
  rules?: V1PolicyRule[];
  config?: PublishConfigInput;
  timing?: Partial<PublishTiming>;
  podLabels?: Record<string, string>;
  wallClock?: () => Date;
  /** Timers and durations of the publisher; real time when left out. */
  clock?: Clock;
  /** Backoff jitter; Math.random when left out. */
  random?: () => number;
  stillLeads?: (target: LeadershipState) => boolean;
  renewals?: (target: LeadershipState) => number | null;
  /** Each version of its own pod the publisher hands on (the health gate's input). */
  onPod?: (pod: Pod) => void;
  /** The namespace (NAMESPACE when left out); give one of its own with admissionPolicy. */
  namespace?: string;
  /**
   * The chart's admission policy, installed with the namespace's RBAC on the real server (the
   * in-process one has no admission policies); a namespace installed once keeps what it got.
   */
  admissionPolicy?: StartOptions["admissionPolicy"];
}

export async function startHarness(kube: KubeServerKind, options: HarnessOptions = {}): Promise<Harness> {
  const namespace = options.namespace ?? NAMESPACE;
  const server = await kube.start({
    namespace,
    ...(options.rules ? { rules: options.rules } : {}),
    ...(options.admissionPolicy ? { admissionPolicy: options.admissionPolicy } : {}),
  });
  await server.seedPod({
    metadata: { name: POD, namespace, labels: options.podLabels ?? { ...APP_LABELS } },
  });
  // The product's own kubeconfig reader, on the same credentials the test client uses.
  const connection = await kubeconfigTextConnection(server.kubeConfig({ namespace }).exportConfig());
  const logs: LogLine[] = [];
  const logger = createLogger("debug", [], { write: (line) => logs.push(JSON.parse(line)) });
  const patches: PatchObservation[] = [];
  const published: PublishedObservation[] = [];
  const publishers: PodPublisher[] = [];

  function make(input: PublishConfigInput, hooks: boolean): PodPublisher {
    const result = validatePublishConfig({
      namespace,
      podName: POD,
      resyncIntervalMs: 60_000,
      ...options.config,
      ...input,
    });
    if ("problems" in result) throw new Error(result.problems.join("; "));
    const publisher = createPodPublisher({
      connection,
      config: result.config,
      logger,
      timing: { ...FAST, ...options.timing },
      ...(options.wallClock ? { wallClock: options.wallClock } : {}),
      ...(options.clock ? { clock: options.clock } : {}),
      ...(options.random ? { random: options.random } : {}),
      ...(options.stillLeads ? { stillLeads: options.stillLeads } : {}),
      ...(options.renewals ? { renewals: options.renewals } : {}),
      ...(options.onPod ? { onPod: options.onPod } : {}),
      ...(hooks
        ? {
            onPatch: (e: PatchObservation) => patches.push(e),
            onPublished: (e: PublishedObservation) => published.push(e),
          }
        : {}),
    });
    publishers.push(publisher);
    return publisher;
  }

  return {
    server,
    publisher: make({}, true),
    logs,
    patches,
    published,
    pod: async (name = POD) => {
      const pod = await server.pod(namespace, name);
      if (!pod) throw new Error(`pod ${name} is gone`);
      return pod;
    },
    another: (config = {}) => make(config, false),
    async close() {
      const stopped = Promise.all(publishers.map((p) => p.stop()));
      // On a ManualClock, stop() may be waiting out a request timeout or a retry: let time pass.
      const { clock } = options;
      if (clock instanceof ManualClock) while (!(await settled(stopped))) clock.advance(1_000);
      await stopped;
      await server.close();
    },
  };
}

/** Polls `check` until it returns true, or fails after `timeoutMs` naming what it waited for. */
export async function until(
  what: string,
  check: () => boolean | Promise<boolean>,
  timeoutMs = 3_000,
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    // A check may read the real API server: 10 ms keeps that a small load on a shared host.
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}

/**
 * Whether `promise` has settled once the work already queued has run. For a promise that only a
 * timer on a ManualClock can settle, false proves it waits for that clock.
 */
export async function settled(promise: Promise<unknown>): Promise<boolean> {
  let done = false;
  promise.then(
    () => (done = true),
    () => (done = true),
  );
  await new Promise((resolve) => setImmediate(resolve));
  return done;
}

export function role(pod: V1Pod): string | undefined {
  return pod.metadata?.labels?.["pglease.io/role"];
}

export function leaderCondition(pod: V1Pod) {
  return pod.status?.conditions?.find((c) => c.type === "pglease.io/leader");
}

/** PATCH requests to a pod (and its status), in arrival order, as "name" or "name/status". */
export function patchesOf(server: TestKube): Array<{ target: string; body: unknown; contentType?: string }> {
  return server.requests
    .filter((r) => r.method === "PATCH")
    .map((r) => ({
      target: `${r.name}${r.subresource ? `/${r.subresource}` : ""}`,
      body: r.body,
      ...(r.contentType ? { contentType: r.contentType } : {}),
    }));
}
