// Prometheus metrics on a registry of our own (never the global one, so a host application's
// metrics and ours cannot collide). Names follow client-go where one exists.
import client from "prom-client";
import type { Elector, TickReport } from "../election/elector.ts";
import type { PatchObservation, PublishedObservation } from "../kube/publisher-contract.ts";

const LATENCY_BUCKETS = [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5];

export class SidecarMetrics {
  readonly registry = new client.Registry();
  readonly #masterStatus = new client.Gauge({
    name: "leader_election_master_status",
    help: "1 when this process leads the named lease, 0 otherwise (client-go's name)",
    labelNames: ["name"],
    registers: [this.registry],
  });
  readonly #fence = new client.Gauge({
    name: "pglease_fence",
    help: "Fence of the current term (this process's own when it leads, else the leader's as last seen)",
    labelNames: ["lease"],
    registers: [this.registry],
  });
  readonly #transitions = new client.Counter({
    name: "pglease_transitions_total",
    help: "Leadership changes of this process, by direction",
    labelNames: ["lease", "direction"],
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
  readonly #durations = {
    claim: this.#histogram(
      "pglease_claim_duration_seconds",
      "Duration of lease claims (and the read before them), by outcome",
    ),
    renew: this.#histogram("pglease_renew_duration_seconds", "Duration of lease renews, by outcome"),
    release: this.#histogram("pglease_release_duration_seconds", "Duration of lease releases, by outcome"),
    read: this.#histogram(
      "pglease_read_duration_seconds",
      "Duration of a follower's look at the lease, by outcome",
    ),
  };
  readonly #renewFailures = new client.Counter({
    name: "pglease_renew_failures_total",
    help: "Renews that did not succeed, by kind: transient (retried) or lost (definitive)",
    labelNames: ["lease", "kind"],
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
    help: "Failed Kubernetes patches, by target and HTTP status",
    labelNames: ["target", "status"],
    registers: [this.registry],
  });
  readonly #publishLag = new client.Histogram({
    name: "pglease_publish_lag_seconds",
    help: "Time from a leadership change to the pod showing it",
    labelNames: ["role"],
    buckets: [0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30],
    registers: [this.registry],
  });

  readonly #clockSteps = new client.Counter({
    name: "pglease_db_clock_steps_total",
    help: "Steps of the database server's clock against this process's monotonic clock beyond the safety margin, by direction",
    labelNames: ["lease", "direction"],
    registers: [this.registry],
  });

  constructor() {
    client.collectDefaultMetrics({ register: this.registry });
  }

  #histogram(name: string, help: string): client.Histogram<"lease" | "outcome"> {
    return new client.Histogram({
      name,
      help,
      labelNames: ["lease", "outcome"],
      buckets: LATENCY_BUCKETS,
      registers: [this.registry],
    });
  }

  #sample(elector: Elector): void {
    const status = elector.status();
    this.#masterStatus.set({ name: elector.key }, status.role === "leader" ? 1 : 0);
    this.#remaining.set({ lease: elector.key }, (status.deadlineInMs ?? 0) / 1000);
    if (status.leaderFence !== null) this.#fence.set({ lease: elector.key }, status.leaderFence);
  }

  watch(elector: Elector): void {
    const lease = elector.key;
    this.#electors.push(elector);
    this.#sample(elector);
    elector.on("clock-step", (step) => this.#clockSteps.inc({ lease, direction: step.direction }));
    elector.on("tick", (tick: TickReport) => {
      if (tick.action !== "deadline")
        this.#durations[tick.action].observe({ lease, outcome: tick.outcome }, tick.durationMs / 1000);
      if (tick.action === "renew" && tick.outcome === "transient-error")
        this.#renewFailures.inc({ lease, kind: "transient" });
      if (tick.outcome === "lost") this.#renewFailures.inc({ lease, kind: "lost" });
      if (tick.outcome === "acquired") this.#transitions.inc({ lease, direction: "gained" });
      if (tick.outcome === "lost" || tick.outcome === "stepped-down" || tick.outcome === "released") {
        this.#transitions.inc({ lease, direction: "lost" });
      }
      this.#sample(elector);
    });
  }

  observePatch(e: PatchObservation): void {
    this.#patchDuration.observe({ target: e.target }, e.durationMs / 1000);
    if (!e.ok) this.#patchErrors.inc({ target: e.target, status: String(e.status ?? "none") });
  }

  observePublished(e: PublishedObservation): void {
    this.#publishLag.observe({ role: e.role }, e.sinceChangeMs / 1000);
  }
}
