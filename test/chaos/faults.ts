// Injects one planned fault into the running cluster, keeps it on for its duration, heals it,
// and says what it did and when. A fault whose target is down (killed a moment ago by the other
// fault of a pair) is skipped and says so.
import { setTimeout as sleep } from "node:timers/promises";
import type { ChaosCluster } from "./cluster.ts";
import { injectCrashReported } from "./crash-fault.ts";
import { type Active, injectDatabaseFault } from "./db-faults.ts";
import { startFailover } from "./failover.ts";
import { injectHandover } from "./handover-fault.ts";
import type { InjectedFault } from "./history.ts";
import type { Replica } from "./replica.ts";
import type { PlannedFault } from "./schedule.ts";
import { injectSessionKill, injectSessionStall } from "./session-fault.ts";

function targetOf(cluster: ChaosCluster, fault: PlannedFault): Replica {
  const leader = fault.target === "leader" ? cluster.recorder.believedLeader() : null;
  return cluster.replica(leader ?? cluster.podNames()[fault.fallback] ?? "chaos-0");
}

/** How the report names the target: whether it led when hit is what makes a fault hurt. */
function roleOf(cluster: ChaosCluster, replica: Replica): string {
  return cluster.recorder.believedLeader() === replica.name ? "leader" : "follower";
}

/** Requests about this pod: its own patches and gets, and a new leader's demotion of it. */
const aboutPod = (pod: string) => (request: { path: string }) =>
  request.path.endsWith(`/pods/${pod}`) || request.path.endsWith(`/pods/${pod}/status`);

const healedNow = async () => Date.now();

/** The container-restart analogue and the LISTEN connection's black hole; null for other kinds. */
function injectPodFault(
  replica: Replica,
  fault: PlannedFault,
  base: Pick<InjectedFault, "kind" | "target" | "startedAt">,
  skipped: (why: string) => Active,
): Active | null {
  switch (fault.kind) {
    case "pod-restart": {
      const restart = replica.restartPod();
      if (!restart) return skipped("sidecar not running");
      return {
        ...base,
        detail: `SIGKILL of the pod's sidecar and workload, both started again after ${fault.durationMs} ms`,
        heal: async () => {
          restart();
          return Date.now();
        },
      };
    }
    case "listen-blackhole": {
      // The startup packet names the release feed's session: only that connection goes silent.
      const silenced = replica.dbProxy.blackholeMatching("pglease-listen");
      if (silenced.count === 0) return skipped("no LISTEN connection open");
      return {
        ...base,
        detail: `LISTEN connection black-holed for ${fault.durationMs} ms`,
        heal: async () => {
          silenced.heal();
          return Date.now();
        },
      };
    }
    default:
      return null;
  }
}

/**
 * The application container of the pod turns unready, as its readiness probe would make the
 * kubelet report, and ready again at the heal. Each write is recorded once the server stored it.
 */
async function injectAppUnready(
  cluster: ChaosCluster,
  replica: Replica,
  fault: PlannedFault,
  base: Pick<InjectedFault, "kind" | "target" | "startedAt">,
): Promise<Active> {
  const kube = cluster.kube;
  if (!kube) throw new Error("faults: the cluster is not started");
  const write = async (ready: boolean) => {
    await kube.setAppReady(replica.name, ready);
    const at = Date.now();
    cluster.recorder.appReadinessChanged(replica.name, ready, at);
    return at;
  };
  const startedAt = await write(false);
  return {
    ...base,
    startedAt,
    detail: `application container unready for ${fault.durationMs} ms`,
    heal: () => write(true),
  };
}

async function inject(cluster: ChaosCluster, fault: PlannedFault): Promise<Active> {
  const replica = targetOf(cluster, fault);
  const role = roleOf(cluster, replica);
  const base = { kind: fault.kind, target: `${replica.name} (${role})`, startedAt: Date.now() };
  const skipped = (why: string): Active => ({ ...base, detail: `skipped: ${why}`, heal: healedNow });
  const kube = cluster.kube;
  const postgres = cluster.postgres;
  if (!kube || !postgres) throw new Error("faults: the cluster is not started");
  const onDatabase = injectDatabaseFault(cluster, fault, base);
  if (onDatabase) return onDatabase;
  const onPod = injectPodFault(replica, fault, base, skipped);
  if (onPod) return onPod;
  if (fault.kind === "app-unready") return injectAppUnready(cluster, replica, fault, base);
  const handover = await injectHandover(cluster, fault, base, skipped);
  if (handover) return handover;
  const sessionKill = await injectSessionKill(cluster, fault, base, skipped);
  if (sessionKill) return sessionKill;
  const sessionStall = await injectSessionStall(cluster, fault, base, skipped);
  if (sessionStall) return sessionStall;
  const crash = await injectCrashReported(cluster, replica, fault, base, skipped);
  if (crash) return crash;
  switch (fault.kind) {
    case "sigkill": {
      if (!replica.killSidecar()) return skipped("sidecar not running");
      return {
        ...base,
        detail: `SIGKILL, restarted after ${fault.durationMs} ms`,
        heal: async () => {
          replica.startSidecar();
          return Date.now();
        },
      };
    }
    case "sigstop": {
      const token = replica.pause(fault.scope);
      if (!token) return skipped("sidecar not running");
      return {
        ...base,
        detail: `SIGSTOP of the ${fault.scope} for ${fault.durationMs} ms`,
        heal: async () => {
          token.end();
          return Date.now();
        },
      };
    }
    case "loop-block": {
      const window = replica.blockLoop();
      return {
        ...base,
        detail: `event loop blocked for ${fault.durationMs} ms`,
        heal: async () => (await window)?.to ?? Date.now(),
      };
    }
    case "db-cut":
    case "db-blackhole":
    case "db-delay": {
      const proxy = replica.dbProxy;
      if (fault.kind === "db-cut") proxy.cut();
      else if (fault.kind === "db-blackhole") proxy.blackhole();
      else proxy.delay(fault.latencyMs);
      const what = fault.kind === "db-delay" ? `delayed ${fault.latencyMs} ms each way` : fault.kind.slice(3);
      return {
        ...base,
        detail: `database link ${what} for ${fault.durationMs} ms`,
        heal: async () => {
          proxy.heal();
          return Date.now();
        },
      };
    }
    case "pg-restart": {
      // Started now, healed when the server accepts connections again.
      const restarted = postgres.restart({ mode: fault.restartMode, downMs: fault.durationMs });
      return {
        ...base,
        target: null,
        detail: `PostgreSQL ${fault.restartMode} stop, down ${fault.durationMs} ms, then started`,
        heal: async () => {
          await restarted;
          return Date.now();
        },
      };
    }
    case "pg-failover":
    case "pg-failover-lagging": {
      const failover = startFailover(cluster, fault, replica);
      return {
        ...base,
        target: failover.target,
        get detail() {
          return failover.detail;
        },
        heal: () => failover.heal(),
      };
    }
    case "api-500": {
      let on = true;
      const matches = aboutPod(replica.name);
      kube.faults.failNext({ status: 500, count: Number.MAX_SAFE_INTEGER, match: (r) => on && matches(r) });
      return {
        ...base,
        detail: `API server answers 500 about pod ${replica.name} for ${fault.durationMs} ms`,
        heal: async () => {
          on = false;
          return Date.now();
        },
      };
    }
    case "api-hang": {
      const hang = kube.faults.hang({ match: aboutPod(replica.name) });
      return {
        ...base,
        detail: `API server holds requests about pod ${replica.name} for ${fault.durationMs} ms`,
        heal: async () => {
          hang.release();
          return Date.now();
        },
      };
    }
    case "api-unreachable": {
      replica.apiProxy.cut();
      return {
        ...base,
        detail: `API server unreachable from ${replica.name} for ${fault.durationMs} ms`,
        heal: async () => {
          replica.apiProxy.heal();
          return Date.now();
        },
      };
    }
    default:
      throw new Error(`faults: no injector for ${fault.kind}`);
  }
}

const SELF_TIMED = new Set(["pg-restart", "loop-block", "pg-failover", "pg-failover-lagging"]);

/** Waits the fault's delay, injects it, keeps it on for its duration, heals it. */
export async function runFault(
  cluster: ChaosCluster,
  fault: PlannedFault,
  signal: AbortSignal,
): Promise<InjectedFault> {
  await sleep(fault.delayMs, undefined, { signal });
  const startedAt = Date.now();
  // A fault that cannot be injected (its session refused while the other fault of a pair
  // restarts PostgreSQL, say) is skipped and says why; the run goes on.
  const active = await inject(cluster, fault).catch(
    (error: Error): Active => ({
      kind: fault.kind,
      target: null,
      startedAt,
      detail: `skipped: could not inject: ${error.message}`,
      heal: async () => Date.now(),
    }),
  );
  // pg-restart and the failovers keep the server down for their duration; the others are held here.
  if (!SELF_TIMED.has(fault.kind)) {
    await sleep(fault.durationMs, undefined, { signal }).catch(() => {});
  }
  const healedAt = await active.heal().catch((error: Error) => {
    active.detail += ` (heal failed: ${error.message})`;
    return Date.now();
  });
  return {
    kind: active.kind,
    target: active.target,
    startedAt: active.startedAt,
    healedAt,
    detail: active.detail,
    ...(active.serverEnded?.length ? { serverEnded: active.serverEnded } : {}),
    ...(active.sessionEnded?.length ? { sessionEnded: active.sessionEnded } : {}),
    ...(active.sessionStalled?.length ? { sessionStalled: active.sessionStalled } : {}),
  };
}
