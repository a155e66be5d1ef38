// Prometheus metrics on a registry of our own (never the global one, so a host application's
// metrics and ours cannot collide). Our own names (pglease_*) first: client-go's
// leader_election_master_status is also exported by every controller-runtime operator, so a
// dashboard on it mixes their leases into ours; it stays for compatibility. Label values come
// from fixed sets or from the leases the user listed, never from what arrives over the wire.

import type { Elector, TickReport } from "../election/elector.ts";
import type { PatchObservation, PublishedObservation } from "../kube/publisher-contract.ts";
import { LeaseTimingMetrics } from "./lease-timing-metrics.ts";
import * as client from "./prom-client.ts";

export const LATENCY_BUCKETS = [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5];

/** How leadership is gained: the history's words, then the elector's outcome when the store said none. */
const GAINED_REASONS = [
  "claim",
  "handover",
  "expiry-takeover",
  "restart-takeover",
  "session-takeover",
  "new-term",
  "acquired",
] as const;

/** Every reason a transition can be counted under: gains, then how leadership ends. */
export const TRANSITION_REASONS = [...GAINED_REASONS, "release", "resigned", "lost", "stepped-down"] as const;

const GAINED = new Set<string>(GAINED_REASONS);

export interface BuildInfo {
  version: string;
}

export class SidecarMetrics {
  readonly registry = new client.Registry();
  readonly #leases: ReadonlySet<string>;
  readonly #masterStatus = new client.Gauge({
    name: "leader_election_master_status",
    help: "1 when this process leads the named lease, 0 otherwise (client-go's name, kept for compatibility; prefer pglease_leader)",
    labelNames: ["name"],
    registers: [this.registry],
  });
  readonly #leader = this.#gauge("pglease_leader", "1 when this process leads the lease, 0 otherwise", [
    "lease",
  ]);
  readonly #fence = this.#gauge(
    "pglease_fence",
    "Fence of the current term (this process's own when it leads, else the leader's as last seen)",
    ["lease"],
  );
  readonly #transitions = new client.Counter({
    name: "pglease_transitions_total",
    help: "Leadership changes of this process, by direction (gained/lost) and reason (the history table's words, or the elector's outcome)",
    labelNames: ["lease", "direction", "reason"],
    registers: [this.registry],
  });
  readonly #electors: Elector[] = [];
  readonly #remaining = new client.Gauge({
    name: "pglease_lease_remaining_seconds",
    help: "Local time left before this leader steps down without a renew (0 for followers)",
    labelNames: ["lease"],
    registers: [this.registry],
    // Sampled at scrape time so the remaining time is fresh.
    collect: () => {
      for (const elector of this.#electors) this.#sample(elector);
    },
  });
  readonly #statements = new client.Histogram({
    name: "pglease_statement_duration_seconds",
    help: "Duration of the elector's lease statements (claim, renew, release, read), by outcome",
    labelNames: ["lease", "statement", "outcome"],
    buckets: LATENCY_BUCKETS,
    registers: [this.registry],
  });
  readonly #renewFailures = new client.Counter({
    name: "pglease_renew_failures_total",
    help: "Renews that did not succeed, by kind: transient (retried) or lost (definitive)",
    labelNames: ["lease", "kind"],
    registers: [this.registry],
  });
  readonly #notices = new client.Counter({
    name: "pglease_release_notices_total",
    help: 'Release notices heard (LISTEN/NOTIFY), by lease; lease="other" for keys this process does not campaign for',
    labelNames: ["lease"],
    registers: [this.registry],
  });
  readonly #patchDuration = new client.Histogram({
    name: "pglease_pod_patch_duration_seconds",
    help: "Duration of Kubernetes patches, by target",
    labelNames: ["target"],
    buckets: LATENCY_BUCKETS,
    registers: [this.registry],
  });
  readonly #patchErrors = new client.Counter({
    name: "pglease_pod_patch_errors_total",
    help: "Failed Kubernetes patches (publish failures), by target and HTTP status code (none: no answer)",
    labelNames: ["target", "code"],
    registers: [this.registry],
  });
  readonly #publishLag = new client.Histogram({
    name: "pglease_publish_lag_seconds",
    help: "Time from a leadership change to the pod showing it (publish latency)",
    labelNames: ["role"],
    buckets: [0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30],
    registers: [this.registry],
  });
  readonly #timing: LeaseTimingMetrics;

  /**
   * `leases`: the names the user listed, the only lease label values a notice may carry.
   * `now`: the electors' clock.
   */
  constructor(
    build: BuildInfo = { version: "unknown" },
    leases: readonly string[] = [],
    now: () => number = () => performance.now(),
  ) {
    this.#leases = new Set(leases);
    this.#timing = new LeaseTimingMetrics(this.registry, now);
    client.collectDefaultMetrics(this.registry);
    new client.Gauge({
      name: "pglease_build_info",
      help: "Always 1; the labels say which pglease and which Node.js run",
      labelNames: ["version", "node_version"],
      registers: [this.registry],
    }).set({ version: build.version, node_version: process.version }, 1);
  }

  #gauge(name: string, help: string, labelNames: string[]): client.Gauge {
    return new client.Gauge({ name, help, labelNames, registers: [this.registry] });
  }

  #sample(elector: Elector): void {
    const status = elector.status();
    const leading = status.role === "leader" ? 1 : 0;
    this.#masterStatus.set({ name: elector.key }, leading);
    this.#leader.set({ lease: elector.key }, leading);
    this.#remaining.set({ lease: elector.key }, (status.deadlineInMs ?? 0) / 1000);
    if (status.leaderFence !== null) this.#fence.set({ lease: elector.key }, status.leaderFence);
  }

  watch(elector: Elector): void {
    const lease = elector.key;
    this.#electors.push(elector);
    this.#sample(elector);
    this.#timing.watch(elector);
    // At 0 from the start: increase() sees nothing of a series whose first sample is already 1.
    for (const reason of TRANSITION_REASONS) {
      this.#transitions.inc({ lease, direction: GAINED.has(reason) ? "gained" : "lost", reason }, 0);
    }
    for (const kind of ["transient", "lost"]) this.#renewFailures.inc({ lease, kind }, 0);
    elector.on("tick", (tick: TickReport) => {
      if (tick.action !== "deadline" && tick.action !== "session-lost") {
        this.#statements.observe(
          { lease, statement: tick.action, outcome: tick.outcome },
          tick.durationMs / 1000,
        );
      }
      if (tick.action === "renew" && tick.outcome === "transient-error")
        this.#renewFailures.inc({ lease, kind: "transient" });
      if (tick.outcome === "lost") this.#renewFailures.inc({ lease, kind: "lost" });
      this.#sample(elector);
    });
    elector.on("transition", (tick: TickReport) => {
      const reason = transitionReason(tick);
      if (reason !== null)
        this.#transitions.inc({ lease, direction: GAINED.has(reason) ? "gained" : "lost", reason });
    });
  }

  /**
   * The health gate's input and its handovers, read at each scrape. `gate` (pod or url) says
   * where readiness comes from; before the first report there is no sample (unknown is not a value).
   */
  watchHealth(gate: string, view: () => { ready: boolean | null; handovers: number }): void {
    new client.Gauge({
      name: "pglease_application_ready",
      help: "The health gate's input: 1 when the application is ready, 0 when not; absent before the first report",
      labelNames: ["gate"],
      registers: [this.registry],
      collect() {
        const ready = view().ready;
        this.reset();
        if (ready !== null) this.set({ gate }, ready ? 1 : 0);
      },
    });
    new client.Counter({
      name: "pglease_health_handovers_total",
      help: "Handovers because the application stayed unready past the grace period with a healthy candidate seen",
      registers: [this.registry],
      collect() {
        this.reset();
        this.inc(view().handovers);
      },
    });
  }

  observeNotice(key: string): void {
    this.#notices.inc({ lease: this.#leases.has(key) ? key : "other" });
  }

  observePatch(e: PatchObservation): void {
    this.#patchDuration.observe({ target: e.target }, e.durationMs / 1000);
    if (!e.ok) this.#patchErrors.inc({ target: e.target, code: String(e.status ?? "none") });
  }

  observePublished(e: PublishedObservation): void {
    this.#publishLag.observe({ role: e.role }, e.sinceChangeMs / 1000);
  }
}

/** The reason a leadership change of this process is counted under; null when it is not one. */
function transitionReason(tick: TickReport): (typeof TRANSITION_REASONS)[number] | null {
  switch (tick.outcome) {
    case "acquired": {
      const reason = TRANSITION_REASONS.find((r) => GAINED.has(r) && r === tick.change?.reason);
      return reason ?? "acquired";
    }
    case "released":
      return "release";
    case "resigned":
    case "lost":
    case "stepped-down":
      return tick.outcome;
    default:
      return null;
  }
}
