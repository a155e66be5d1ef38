// How close leadership comes to ending by itself: renews sent later than their interval, the
// local time left before the deadline when a renew's answer arrives, and the database server's
// clock against this process's. Measured on the elector's clock (performance.now() in the sidecar).

import type { Elector, TickReport } from "../election/elector.ts";
import * as client from "./prom-client.ts";

// Seconds late or left: from a millisecond to beyond a default lease. The chart's
// PgleaseRenewNearDeadline picks one of these bounds (charts/pglease/templates/prometheus-rule.yaml).
export const MARGIN_BUCKETS = [0.001, 0.01, 0.05, 0.1, 0.25, 0.5, 1, 2, 3, 5, 7.5, 10, 15, 30];

export class LeaseTimingMetrics {
  readonly #lateness: client.Histogram<"lease">;
  readonly #margin: client.Histogram<"lease">;
  readonly #offset: client.Gauge;
  readonly #steps: client.Counter<"lease" | "direction">;

  readonly #now: () => number;

  constructor(registry: client.Registry, now: () => number) {
    this.#now = now;
    const registers = [registry];
    this.#lateness = new client.Histogram({
      name: "pglease_renew_lateness_seconds",
      help: "How much later than the renew interval after the previous good claim or renew each renew was sent",
      labelNames: ["lease"],
      buckets: MARGIN_BUCKETS,
      registers,
    });
    this.#margin = new client.Histogram({
      name: "pglease_deadline_margin_seconds",
      help: "Local time left before the leader's local deadline when a renew's answer arrived (0: it came too late)",
      labelNames: ["lease"],
      buckets: MARGIN_BUCKETS,
      registers,
    });
    this.#offset = new client.Gauge({
      name: "pglease_db_clock_offset_seconds",
      help: "The database server's clock minus this process's wall clock, from the last answer (half its round trip taken off)",
      registers,
    });
    this.#steps = new client.Counter({
      name: "pglease_db_clock_steps_total",
      help: "Steps of the database server's clock against this process's monotonic clock beyond the safety margin, by direction",
      labelNames: ["lease", "direction"],
      registers,
    });
  }

  watch(elector: Elector): void {
    const lease = elector.key;
    const interval = elector.timing.renewIntervalMs;
    let lastGoodSentAt: number | null = null;
    let deadlineAt: number | null = null;
    // At 0 from the start: increase() sees nothing of a series whose first sample is already 1.
    for (const direction of ["forward", "backward"]) this.#steps.inc({ lease, direction }, 0);
    elector.on("clock-step", (step) => this.#steps.inc({ lease, direction: step.direction }));
    elector.on("server-time", ({ serverNowMs, roundTripMs }) => {
      this.#offset.set((serverNowMs - (Date.now() - roundTripMs / 2)) / 1000);
    });
    elector.on("tick", (tick: TickReport) => {
      const now = this.#now();
      const sentAt = now - tick.durationMs;
      if (tick.action === "renew" && lastGoodSentAt !== null) {
        this.#lateness.observe({ lease }, Math.max(0, sentAt - lastGoodSentAt - interval) / 1000);
      }
      if (tick.outcome === "renewed" && deadlineAt !== null) {
        this.#margin.observe({ lease }, Math.max(0, deadlineAt - now) / 1000);
      }
      const leading = tick.state.role === "leader";
      if (leading && (tick.outcome === "acquired" || tick.outcome === "renewed")) lastGoodSentAt = sentAt;
      if (!leading) lastGoodSentAt = null;
      const left = elector.status().deadlineInMs;
      deadlineAt = left === null ? null : now + left;
    });
  }
}
