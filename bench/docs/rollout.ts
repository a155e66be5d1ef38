// The rollout group in docs/operations.md: leadership changes and unlabelled time per rolling update of
// the chart's Deployment, pglease beside client-go, and the planned handover's latency.
import type { RolloutTrial } from "../peers/rollout-lane.ts";
import { duration, NOT_MEASURED, type Reference } from "./reference.ts";

const SERIES = (system: string) => `rollout.rollouts[system=${system}]`;

function changesEach(ref: Reference, system: string): string {
  const trials = ref.value(`${SERIES(system)}.trials`);
  if (!Array.isArray(trials) || trials.length === 0) return NOT_MEASURED;
  return (trials as RolloutTrial[]).map((t) => t.changes).join(", ");
}

function unlabelled(ref: Reference, system: string): string {
  const p50 = ref.number(`${SERIES(system)}.unlabelled.p50Ms`);
  const max = ref.number(`${SERIES(system)}.unlabelled.maxMs`);
  return p50 === undefined || max === undefined ? NOT_MEASURED : `${duration(p50)} / ${duration(max)}`;
}

export function rolloutTable(ref: Reference): string {
  const row = (label: string, system: string, handover: string) =>
    `| ${label} | ${changesEach(ref, system)} | ${unlabelled(ref, system)} | ${handover} |`;
  const strategy = ["replicas", "maxSurge", "maxUnavailable"]
    .map((k) => `${k} ${ref.count(`rollout.deployment.${k}`)}`)
    .join(", ");
  return [
    `The chart's Deployment (${strategy}), rolled ${ref.count(`${SERIES("pglease")}.trials.length`)} times:`,
    "",
    "| election | leadership changes, each rollout | no leader shown (p50 / max) | planned handover → the named pod labelled (p50 / p99) |",
    "|---|---|---:|---:|",
    row(
      "pglease (the chart's sidecar)",
      "pglease",
      ref.spread("rollout.handover[system=pglease].toLabelled"),
    ),
    row("client-go Lease, ReleaseOnCancel", "client-go-release", "no planned handover"),
  ].join("\n");
}
