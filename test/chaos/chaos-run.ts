// One chaos run: start the cluster, wait for a labelled leader, play the seeded schedule (each
// slot: its faults, then quiet until recovery is certain to be visible), stop, read the database's
// change logs, and judge the history. Cleans up on every path, an abort (Ctrl-C) included.
import { setTimeout as sleep } from "node:timers/promises";
import type { Replication } from "../support/postgres/failover-pair.ts";
import { type CheckOptions, type CheckResult, checkHistory } from "./checker.ts";
import { ChaosCluster } from "./cluster.ts";
import { runFault } from "./faults.ts";
import type { History, SessionEnd, Slot } from "./history.ts";
import type { ApiServerChoice } from "./kube.ts";
import { buildHistory, Recorder } from "./recorder.ts";
import {
  CRASH_FAULT_KINDS,
  FAILOVER_FAULT_KINDS,
  FAULT_KINDS,
  type FaultKind,
  type PlannedSlot,
  planSchedule,
  SESSION_FAULT_KINDS,
} from "./schedule.ts";
import { SessionWatch } from "./session-watch.ts";

export interface ChaosOptions {
  seed: string;
  /** Length of the fault phase; start-up and shutdown come on top. */
  durationMs: number;
  replicas: number;
  leaseMs: number;
  retryMs: number;
  /** Writes through the fence guard (true) or straight into the table: the deliberately unsafe variant. */
  guarded: boolean;
  /** Passed to the checker (tolerance, wake-up grace, liveness bound). */
  check?: CheckOptions;
  /** Default: every kind, the failover kinds with `failover`, every kind and leader-session-kill with `sessionTakeover`. */
  kinds?: readonly FaultKind[];
  /** A primary with a streaming standby, replicating synchronously or not (failover.ts). */
  failover?: Replication;
  /** The sidecars run with --session-takeover. */
  sessionTakeover?: boolean;
  /** The sidecars run with --crash-takeover; leader-crash-reported joins every other kind. */
  crashTakeover?: boolean;
  /** Default "auto": the real kube-apiserver when it is built, else the in-process one. */
  apiServer?: ApiServerChoice;
  signal?: AbortSignal;
  /** Progress, one line at a time. */
  progress?(line: string): void;
}

/** Thrown when the run was aborted (Ctrl-C): everything is cleaned up, nothing was judged. */
export class ChaosInterrupted extends Error {
  constructor() {
    super("interrupted: every process was stopped and the temporary files removed; nothing was checked");
    this.name = "ChaosInterrupted";
  }
}

export interface ChaosOutcome {
  schedule: PlannedSlot[];
  history: History;
  result: CheckResult;
  /** Things that happened that are not violations but a reader should know (unexpected exits…). */
  notes: string[];
  writeErrors: Record<string, number>;
  /** What ran: the database (one server, or a pair and its replication) and the API server. */
  setup: { database: string; apiServer: string };
  /** The sidecars' distinct warnings (start-up checks among them), with the replicas that logged them. */
  warnings: { message: string; replicas: string[] }[];
  elapsedMs: number;
}

const LEASE = "chaos";
// Leases every sidecar also campaigns for: four keys among three replicas, so some process leads
// several and renews them with renewMany and releases them with releaseMany, under every fault.
const EXTRA_LEASES = ["chaos-batch-1", "chaos-batch-2", "chaos-batch-3"];
// A bound on a broken start-up, not a wait: on the shared 2-core host at a load average of 25 the
// six Node processes of three replicas took 55 s to elect and write (under 10 s when idle).
const FIRST_LEADER_TIMEOUT_MS = 120_000;
const RECOVERY_SEEN_MS = 300;

export const renewIntervalOf = (leaseMs: number) => Math.floor(leaseMs / 3);
/** Longer than the lease: the others must take over while the loop is stuck. */
export const blockDurationOf = (leaseMs: number) => Math.round(leaseMs * 1.5);

// The first fault must find a leader that is labelled and whose workload is writing already.
const ANY_WRITE = "SELECT EXISTS (SELECT 1 FROM chaos_writes) AS written";

async function steadyLeader(cluster: ChaosCluster, signal: AbortSignal): Promise<void> {
  const deadline = Date.now() + FIRST_LEADER_TIMEOUT_MS;
  const written = async () =>
    (await cluster.admin?.query<{ written: boolean }>(ANY_WRITE))?.rows[0]?.written === true;
  // Every replica past its start-up checks too: a fault that cuts a standby's link before a slow
  // replica inspected the server would leave that replica nothing to warn of.
  const started = () => cluster.podNames().every((name) => cluster.recorder.campaigning(name));
  while (cluster.labelledLeader() === null || !started() || !(await written())) {
    if (Date.now() > deadline) {
      throw new Error(
        `no labelled, writing leader with every replica campaigning within ${FIRST_LEADER_TIMEOUT_MS} ms of start`,
      );
    }
    await sleep(20, undefined, { signal });
  }
}

function distinctWarnings(warnings: Recorder["warnings"]): ChaosOutcome["warnings"] {
  const byMessage = new Map<string, Set<string>>();
  for (const w of warnings) byMessage.set(w.message, (byMessage.get(w.message) ?? new Set()).add(w.replica));
  return [...byMessage].map(([message, replicas]) => ({ message, replicas: [...replicas].sort() }));
}

/** Quiet after a heal: at least minSettleMs, then until a labelled leader runs, at most settleMs. */
async function settle(cluster: ChaosCluster, planned: PlannedSlot, signal: AbortSignal): Promise<void> {
  const healed = Date.now();
  await sleep(planned.minSettleMs, undefined, { signal }).catch(() => {});
  while (!signal.aborted && cluster.labelledLeader() === null && Date.now() - healed < planned.settleMs) {
    await sleep(50, undefined, { signal }).catch(() => {});
  }
  // The checker sees the leader from the logs a moment after this process did.
  if (!signal.aborted) await sleep(RECOVERY_SEEN_MS, undefined, { signal }).catch(() => {});
}

function defaultKinds(options: ChaosOptions): readonly FaultKind[] | undefined {
  if (options.failover) return FAILOVER_FAULT_KINDS;
  if (!options.sessionTakeover && !options.crashTakeover) return undefined;
  return [
    ...FAULT_KINDS,
    ...(options.sessionTakeover ? SESSION_FAULT_KINDS : []),
    ...(options.crashTakeover ? CRASH_FAULT_KINDS : []),
  ];
}

/** Each session end once, from the watch and the faults that know theirs: the tighter bounds. */
function sessionEnds(watched: readonly SessionEnd[], slots: readonly Slot[]): SessionEnd[] {
  const byTerm = new Map<string, SessionEnd>();
  const known = slots.flatMap((s) => s.faults.flatMap((f) => f.sessionEnded ?? []));
  for (const end of [...watched, ...known]) {
    const key = `${end.holder} ${end.fence}`;
    const seen = byTerm.get(key);
    byTerm.set(
      key,
      seen ? { ...end, from: Math.max(seen.from, end.from), to: Math.min(seen.to, end.to) } : end,
    );
  }
  return [...byTerm.values()];
}

export async function runChaos(options: ChaosOptions): Promise<ChaosOutcome> {
  const began = Date.now();
  const signal = options.signal ?? new AbortController().signal;
  const progress = options.progress ?? (() => {});
  const schedule = planSchedule({
    seed: options.seed,
    durationMs: options.durationMs,
    replicas: options.replicas,
    leaseMs: options.leaseMs,
    renewMs: renewIntervalOf(options.leaseMs),
    blockMs: blockDurationOf(options.leaseMs),
    kinds: options.kinds ?? defaultKinds(options),
  });
  const notes: string[] = [];
  const recorder = new Recorder(LEASE);
  const cluster = new ChaosCluster(
    {
      replicas: options.replicas,
      lease: LEASE,
      extraLeases: EXTRA_LEASES,
      leaseMs: options.leaseMs,
      retryMs: options.retryMs,
      blockMs: blockDurationOf(options.leaseMs),
      guarded: options.guarded,
      sessionTakeover: options.sessionTakeover ?? false,
      crashTakeover: options.crashTakeover ?? false,
      ...(options.failover ? { failover: options.failover } : {}),
      apiServer: options.apiServer ?? "auto",
      note: (message) => {
        notes.push(message);
        progress(`note: ${message}`);
      },
    },
    recorder,
  );
  const slots: Slot[] = [];
  let watches: SessionWatch[] = [];
  try {
    await cluster.start();
    const url = cluster.postgres?.url;
    if (options.sessionTakeover && url) {
      watches = [LEASE, ...EXTRA_LEASES].map((key) => new SessionWatch(url, key));
    }
    if (cluster.clockMissing) cluster.settings.note(`clock-step faults are skipped: ${cluster.clockMissing}`);
    await steadyLeader(cluster, signal).catch((error: unknown) => {
      throw signal.aborted ? new ChaosInterrupted() : error;
    });
    const from = Date.now();
    progress(`${cluster.labelledLeader()} leads; ${schedule.length} fault slots planned`);
    for (const planned of schedule) {
      if (signal.aborted) break;
      if (Date.now() - from + planned.healMs + planned.minSettleMs > options.durationMs) break;
      const faults = await Promise.all(planned.faults.map((f) => runFault(cluster, f, signal)));
      const slot: Slot = {
        index: planned.index,
        kind: planned.kind,
        startedAt: Math.min(...faults.map((f) => f.startedAt)),
        healedAt: Math.max(...faults.map((f) => f.healedAt)),
        faults,
      };
      slots.push(slot);
      const at = ((slot.startedAt - from) / 1000).toFixed(1);
      progress(
        `[${at}s] ${planned.kind}: ${faults.map((f) => `${f.detail} (${f.target ?? "all"})`).join(" + ")}`,
      );
      cluster.kube?.clearRequests();
      await settle(cluster, planned, signal);
    }
    const to = Date.now();
    // Shutdown is judged too: the recording runs until every process has exited.
    await cluster.stopReplicas();
    const end = Date.now();
    const watched = (await Promise.all(watches.map((w) => w.stop()))).flat();
    if (signal.aborted) throw new ChaosInterrupted();
    if (!cluster.admin) throw new Error("the cluster has no database pool");
    const database = await recorder.readDatabase(cluster.admin);
    const history = buildHistory(recorder, {
      lease: LEASE,
      extraLeases: EXTRA_LEASES,
      leaseMs: options.leaseMs,
      window: { from, to },
      end,
      pods: Object.fromEntries(cluster.podNames().map((name) => [name, name])),
      labels: cluster.labels?.changes ?? [],
      slots,
      ...database,
      ...(options.sessionTakeover ? { sessionEnds: sessionEnds(watched, slots) } : {}),
    });
    return {
      schedule,
      history,
      result: checkHistory(history, {
        ...options.check,
        ...(options.crashTakeover ? { crashTakeover: true } : {}),
      }),
      notes,
      writeErrors: Object.fromEntries(recorder.writeErrors),
      setup: {
        database: cluster.failover
          ? `a primary and ${options.failover === "sync" ? "a synchronous" : "an asynchronous"} streaming standby, ${cluster.failover.failovers} failovers`
          : "one PostgreSQL server",
        apiServer:
          cluster.kube?.kind === "real"
            ? "the real kube-apiserver (through the fault proxy)"
            : "the in-process API server",
      },
      warnings: distinctWarnings(recorder.warnings),
      elapsedMs: Date.now() - began,
    };
  } finally {
    await Promise.all(watches.map((w) => w.stop()));
    await cluster.stop();
  }
}
