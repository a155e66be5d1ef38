// The usual alternative to pglease, for the bench: Kubernetes Lease-based leader election as
// client-go's tools/leaderelection does it (acquire loop with jitter, tryAcquireOrRenew with the
// leader's optimistic fast path, renew deadline, optional release on cancel), written for Node
// with the real @kubernetes/client-node CoordinationV1Api. Run as its own process, one per pod:
//
//   KUBECONFIG=… POD_NAME=web-1 POD_NAMESPACE=shop node bench/peers/client-go-elector.ts \
//     --lease NAME [--lease-duration 15000] [--renew-deadline 10000] [--retry-period 2000] [--release-on-cancel]
//
// One JSON line per event on stdout: started, acquired, new-leader, stopped-leading, released.
// SIGTERM cancels the election as a controller's context cancel does; SIGKILL is a crash.
import { randomUUID } from "node:crypto";
import { setTimeout as sleep } from "node:timers/promises";
import { parseArgs } from "node:util";
import {
  ApiException,
  CoordinationV1Api,
  KubeConfig,
  type V1Lease,
  type V1LeaseSpec,
  V1MicroTime,
} from "@kubernetes/client-node";

/** client-go's wait.JitterUntil factor for the acquire loop: each wait is retry × (1 + up to 1.2). */
const JITTER_FACTOR = 1.2;

interface ElectionRecord {
  holderIdentity: string;
  leaseDurationSeconds: number;
  acquireTime: string;
  renewTime: string;
  leaseTransitions: number;
}

interface Config {
  lease: string;
  namespace: string;
  identity: string;
  leaseDurationMs: number;
  renewDeadlineMs: number;
  retryPeriodMs: number;
  releaseOnCancel: boolean;
}

function log(event: string, fields: Record<string, unknown> = {}): void {
  process.stdout.write(`${JSON.stringify({ event, at: Date.now(), ...fields })}\n`);
}

/** client-go's LeaseLock: the last Lease read or written, so an update carries its resourceVersion. */
class LeaseLock {
  readonly #api: CoordinationV1Api;
  readonly #name: string;
  readonly #namespace: string;
  #lease: V1Lease | null = null;

  constructor(api: CoordinationV1Api, name: string, namespace: string) {
    this.#api = api;
    this.#name = name;
    this.#namespace = namespace;
  }

  /** The record and its raw form (compared byte for byte to notice a change); null when there is no Lease. */
  async get(): Promise<{ record: ElectionRecord; raw: string } | null> {
    try {
      this.#lease = await this.#api.readNamespacedLease({ name: this.#name, namespace: this.#namespace });
    } catch (error) {
      if (error instanceof ApiException && error.code === 404) return null;
      throw error;
    }
    const record = recordOf(this.#lease);
    return { record, raw: JSON.stringify(record) };
  }

  async create(record: ElectionRecord): Promise<void> {
    this.#lease = await this.#api.createNamespacedLease({
      namespace: this.#namespace,
      body: { metadata: { name: this.#name, namespace: this.#namespace }, spec: specOf(record) },
    });
  }

  async update(record: ElectionRecord): Promise<void> {
    if (!this.#lease) throw new Error("lease not initialized, call get or create first");
    this.#lease = await this.#api.replaceNamespacedLease({
      name: this.#name,
      namespace: this.#namespace,
      body: { ...this.#lease, spec: { ...this.#lease.spec, ...specOf(record) } },
    });
  }
}

function specOf(record: ElectionRecord): V1LeaseSpec {
  return {
    ...record,
    acquireTime: new V1MicroTime(record.acquireTime),
    renewTime: new V1MicroTime(record.renewTime),
  };
}

/** MicroTime fields come back from client-node as the server's strings. */
function recordOf(lease: V1Lease): ElectionRecord {
  const spec = lease.spec ?? {};
  const time = (value: unknown) => (value instanceof Date ? value.toISOString() : String(value ?? ""));
  return {
    holderIdentity: spec.holderIdentity ?? "",
    leaseDurationSeconds: spec.leaseDurationSeconds ?? 0,
    acquireTime: time(spec.acquireTime),
    renewTime: time(spec.renewTime),
    leaseTransitions: spec.leaseTransitions ?? 0,
  };
}

class LeaderElector {
  readonly #config: Config;
  readonly #lock: LeaseLock;
  #observed: ElectionRecord | null = null;
  #observedRaw = "";
  /** Monotonic, like the monotonic reading inside Go's time.Time: expiry is judged on the local clock. */
  #observedAt = 0;
  #reportedLeader = "";

  constructor(config: Config, lock: LeaseLock) {
    this.#config = config;
    this.#lock = lock;
  }

  isLeader(): boolean {
    return this.#observed?.holderIdentity === this.#config.identity;
  }

  #leaseValid(now: number): boolean {
    return this.#observedAt + (this.#observed?.leaseDurationSeconds ?? 0) * 1000 > now;
  }

  #setObserved(record: ElectionRecord): void {
    this.#observed = record;
    this.#observedAt = performance.now();
  }

  /** Loops (with jitter) until this candidate holds the lease; false when cancelled first. */
  async acquire(signal: AbortSignal): Promise<boolean> {
    while (!signal.aborted) {
      const succeeded = await this.#tryAcquireOrRenew();
      this.#reportTransition();
      if (succeeded) return true;
      const wait = this.#config.retryPeriodMs * (1 + Math.random() * JITTER_FACTOR);
      await sleep(wait, undefined, { signal }).catch(() => {});
    }
    return false;
  }

  /** Renews every retry period; ends when a renewal did not succeed within the renew deadline, or on cancel. */
  async renew(signal: AbortSignal): Promise<"lost" | "cancelled"> {
    const { retryPeriodMs, renewDeadlineMs } = this.#config;
    while (!signal.aborted) {
      const deadline = performance.now() + renewDeadlineMs;
      let renewed = false;
      while (!signal.aborted && performance.now() < deadline) {
        renewed = await this.#tryAcquireOrRenew();
        if (renewed) break;
        await sleep(retryPeriodMs, undefined, { signal }).catch(() => {});
      }
      this.#reportTransition();
      if (signal.aborted) break;
      if (!renewed) return "lost";
      await sleep(retryPeriodMs, undefined, { signal }).catch(() => {});
    }
    return "cancelled";
  }

  /** Gives the lease up: no holder, one-second duration, so candidates take it at their next look. */
  async release(): Promise<boolean> {
    if (!this.isLeader()) return true;
    const now = new Date().toISOString();
    const record: ElectionRecord = {
      holderIdentity: "",
      leaseDurationSeconds: 1,
      acquireTime: now,
      renewTime: now,
      leaseTransitions: this.#observed?.leaseTransitions ?? 0,
    };
    try {
      await this.#lock.update(record);
    } catch {
      return false;
    }
    this.#setObserved(record);
    return true;
  }

  async #tryAcquireOrRenew(): Promise<boolean> {
    const now = performance.now();
    const wallNow = new Date().toISOString();
    const record: ElectionRecord = {
      holderIdentity: this.#config.identity,
      leaseDurationSeconds: Math.floor(this.#config.leaseDurationMs / 1000),
      acquireTime: wallNow,
      renewTime: wallNow,
      leaseTransitions: 0,
    };
    // 1. The leader writes optimistically, assuming the record it last saw is still current.
    if (this.isLeader() && this.#leaseValid(now) && this.#observed) {
      record.acquireTime = this.#observed.acquireTime;
      record.leaseTransitions = this.#observed.leaseTransitions;
      try {
        await this.#lock.update(record);
        this.#setObserved(record);
        return true;
      } catch {
        // Falls back to the slow path: read, then decide.
      }
    }
    // 2. Read the record, or create it.
    let current: Awaited<ReturnType<LeaseLock["get"]>>;
    try {
      current = await this.#lock.get();
      if (current === null) {
        await this.#lock.create(record);
        this.#setObserved(record);
        return true;
      }
    } catch {
      return false;
    }
    // 3. A changed record restarts the expiry clock, measured from when this candidate saw it.
    if (current.raw !== this.#observedRaw) {
      this.#setObserved(current.record);
      this.#observedRaw = current.raw;
    }
    if (current.record.holderIdentity !== "" && this.#leaseValid(now) && !this.isLeader()) return false;
    // 4. Take it (or renew through the slow path); a concurrent taker makes this a 409.
    if (this.isLeader()) {
      record.acquireTime = current.record.acquireTime;
      record.leaseTransitions = current.record.leaseTransitions;
    } else {
      record.leaseTransitions = current.record.leaseTransitions + 1;
    }
    try {
      await this.#lock.update(record);
    } catch {
      return false;
    }
    this.#setObserved(record);
    return true;
  }

  #reportTransition(): void {
    const holder = this.#observed?.holderIdentity ?? "";
    if (holder === this.#reportedLeader) return;
    this.#reportedLeader = holder;
    log("new-leader", { holder });
  }
}

function configFromArgs(): Config {
  const { values } = parseArgs({
    options: {
      lease: { type: "string" },
      "lease-duration": { type: "string", default: "15000" },
      "renew-deadline": { type: "string", default: "10000" },
      "retry-period": { type: "string", default: "2000" },
      "release-on-cancel": { type: "boolean", default: false },
    },
    strict: true,
  });
  const ms = (name: "lease-duration" | "renew-deadline" | "retry-period") => {
    const value = Number(values[name]);
    if (!Number.isFinite(value) || value <= 0) throw new Error(`--${name}: give milliseconds, e.g. 2000`);
    return value;
  };
  const pod = process.env.POD_NAME;
  if (!values.lease || !pod) throw new Error("--lease and POD_NAME are required");
  const config: Config = {
    lease: values.lease,
    namespace: process.env.POD_NAMESPACE ?? "default",
    identity: `${pod}_${randomUUID()}`,
    leaseDurationMs: ms("lease-duration"),
    renewDeadlineMs: ms("renew-deadline"),
    retryPeriodMs: ms("retry-period"),
    releaseOnCancel: values["release-on-cancel"],
  };
  // client-go's own checks in NewLeaderElector.
  if (config.leaseDurationMs <= config.renewDeadlineMs)
    throw new Error("lease duration must exceed the renew deadline");
  if (config.renewDeadlineMs <= JITTER_FACTOR * config.retryPeriodMs) {
    throw new Error("renew deadline must exceed the retry period times the jitter factor");
  }
  return config;
}

async function main(): Promise<void> {
  const config = configFromArgs();
  const kubeConfig = new KubeConfig();
  kubeConfig.loadFromDefault();
  const lock = new LeaseLock(kubeConfig.makeApiClient(CoordinationV1Api), config.lease, config.namespace);
  const elector = new LeaderElector(config, lock);
  const cancel = new AbortController();
  process.once("SIGTERM", () => cancel.abort());
  process.once("SIGINT", () => cancel.abort());
  log("started", { identity: config.identity, releaseOnCancel: config.releaseOnCancel });
  if (!(await elector.acquire(cancel.signal))) return;
  log("acquired", { identity: config.identity });
  const ended = await elector.renew(cancel.signal);
  log("stopped-leading", { reason: ended });
  if (config.releaseOnCancel) log("released", { ok: await elector.release() });
  // A controller whose leadership ended exits and is restarted; a cancelled one simply exits.
  process.exitCode = ended === "lost" ? 1 : 0;
}

// Exits explicitly: client-node's keep-alive sockets would otherwise hold the process open.
main().then(
  () => process.exit(),
  (error: unknown) => {
    process.stderr.write(`client-go elector: ${error instanceof Error ? error.message : String(error)}\n`);
    process.exit(2);
  },
);
