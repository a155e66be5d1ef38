// The clusters group in the docs: docs/operations.md's cross-cluster failover rows beside the peers
// group's single-cluster pglease rows, from the same reference.
import type { Reference } from "./reference.ts";
import { CRASH, GRACEFUL } from "./shared.ts";

const ACROSS = (event: string) => `clusters.series[event=${event}][system=pglease-two-clusters]`;

export function clustersFailover(ref: Reference): string {
  const row = (stop: string, where: string, series: string) =>
    `| ${stop} | ${where} | ${ref.spread(`${series}.holds`)} | ${ref.spread(`${series}.published`)} |`;
  return [
    "| leader stopped | candidates | new leader holds (p50 / p99) | its pod labelled (p50 / p99) |",
    "|---|---|---:|---:|",
    row("SIGKILL", "one cluster", CRASH("pglease")),
    row("SIGKILL", "two clusters", ACROSS("crash")),
    row("SIGTERM", "one cluster", GRACEFUL("pglease")),
    row("SIGTERM", "two clusters", ACROSS("graceful")),
  ].join("\n");
}
