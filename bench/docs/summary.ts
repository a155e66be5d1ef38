// The summary of docs/performance.md: three short tables from the reference results.
import { NOT_MEASURED, type Reference, timesRange } from "./reference.ts";
import { CRASH, GRACEFUL, STEADY } from "./shared.ts";

const OPS = "lease-ops.operations";
const ONE_CONNECTION = "[setup=1 connection]";

/** A statement's median on one connection, named statements. */
function statement(ref: Reference, operation: string, statements = "named"): string {
  return ref.ms(`${OPS}${ONE_CONNECTION}[operation=${operation}][statements=${statements}].latency.p50Ms`);
}

/** The factors of lease-ops' comparisons named `prefix`, in the setups that flush commits as production does. */
function ratioFactors(ref: Reference, prefix: string): number[] {
  const ratios = ref.value("lease-ops.ratios");
  if (!Array.isArray(ratios)) return [];
  return ratios
    .filter(
      (r: { subject: string; setup: string }) =>
        r.subject.startsWith(prefix) && !r.setup.includes("diagnostic"),
    )
    .map((r: { factor: number }) => r.factor);
}

export function failover(ref: Reference): string {
  const pglease = GRACEFUL("pglease");
  return [
    "| leader stopped → new leader holds (p50 / p99) | pglease | client-go Lease | advisory lock |",
    "|---|---:|---:|---:|",
    `| SIGTERM (graceful) | **${ref.spread(`${pglease}.holds`)}** (labelled: ${ref.spread(`${pglease}.published`)}) | ` +
      `${ref.spread(`${GRACEFUL("client-go-release")}.holds`)} with \`ReleaseOnCancel\`; ` +
      `${ref.spread(`${GRACEFUL("client-go")}.holds`)} without | ${ref.spread(`${GRACEFUL("advisory-lock")}.holds`)} |`,
    `| SIGTERM, \`--no-notify\` (behind PgBouncer) | ${ref.spread(`${GRACEFUL("pglease-no-notify")}.holds`)} | — | — |`,
    `| SIGKILL (crash) | ${ref.spread(`${CRASH("pglease")}.holds`)} — claimed **${ref.spread(`${CRASH("pglease")}.expiryToClaim`)} after the server-side expiry** | ` +
      `${ref.spread(`${CRASH("client-go")}.holds`)} | ${ref.spread(`${CRASH("advisory-lock")}.holds`)} (only while the host and network live: no fence, TCP decides) |`,
  ].join("\n");
}

export function steady(ref: Reference): string {
  const requests = (system: string) => `${STEADY(system)}.apiRequests.perPodPerHour`;
  const more = ref.ratio(requests("client-go"), requests("pglease"));
  const clientGoRequests = ref.count(requests("client-go"));
  const pinned = (system: string) =>
    `${ref.count(`${STEADY(system)}.connections.pinnedPerPod`)} / ${ref.count(`${STEADY(system)}.connections.totalPerPod`)}`;
  const rss = (system: string) => {
    const value = ref.number(`${STEADY(system)}.rssMbPerPod`);
    return value === undefined ? NOT_MEASURED : `${Math.round(value)} MB`;
  };
  const idle = (index: number) => {
    const cliFigures = ref.value("footprint.cli");
    const mean = Array.isArray(cliFigures) ? cliFigures[index]?.rssMb?.meanMb : undefined;
    return typeof mean === "number" ? `${Math.round(mean)} MB` : NOT_MEASURED;
  };
  return [
    "| steady state, per pod per hour | pglease | client-go Lease | advisory lock |",
    "|---|---:|---:|---:|",
    `| database statements | ${ref.count(`${STEADY("pglease")}.statements.perPodPerHour`)} | — | ${ref.count(`${STEADY("advisory-lock")}.statements.perPodPerHour`)} |`,
    `| API server requests | **${ref.count(requests("pglease"))}** | ${clientGoRequests === NOT_MEASURED ? NOT_MEASURED : more === NOT_MEASURED ? clientGoRequests : `${clientGoRequests} (${more} more)`} | — |`,
    `| connections pinned / total | ${pinned("pglease")} (the pinned one: LISTEN) | — | ${pinned("advisory-lock")} |`,
    `| resident memory of the process | ${rss("pglease")} in the quiet election (publishing); \`pglease run\` idle: ${idle(0)} outside a cluster, ${idle(1)} publishing | ${rss("client-go")} | ${rss("advisory-lock")} |`,
  ].join("\n");
}

export function statements(ref: Reference): string {
  const claimOps = ref.count(`${OPS}${ONE_CONNECTION}[operation=claim][statements=named].latency.opsPerSec`);
  const tenThousand = "scale.sizes[leases=10000]";
  const cli = (index: number) => {
    const cliFigures = ref.value("footprint.cli");
    const p50 = Array.isArray(cliFigures) ? cliFigures[index]?.startup?.p50Ms : undefined;
    return typeof p50 === "number" ? `${Math.round(p50)} ms` : NOT_MEASURED;
  };
  return [
    "| single statements, one connection (p50) | |",
    "|---|---:|",
    `| claim | ${statement(ref, "claim")} (~${claimOps}/s) |`,
    `| renew / release / read | ${statement(ref, "renew")} / ${statement(ref, "release")} / ${statement(ref, "read")} |`,
    `| \`pg_try_advisory_lock\` | ${statement(ref, "try-lock", "named, pinned connection")} (${timesRange(ratioFactors(ref, "advisory try-lock vs claim"))} faster than a claim, no fence, pinned connection) |`,
    `| named vs unnamed prepared statements | ${timesRange(ratioFactors(ref, "named vs unnamed"))} faster (the claim's CTE is costly to plan) |`,
    `| renew 10,000 leases in one \`renewMany\` | ${ref.ms(`${tenThousand}.batched.tick.meanMs`)} per tick (mean), ${ref.ratio(`${tenThousand}.oneEach.tick.meanMs`, `${tenThousand}.batched.tick.meanMs`)} faster than one statement each |`,
    `| \`pglease run\` spawn → first claim (p50) | ${cli(0)} outside a cluster, ${cli(1)} publishing |`,
  ].join("\n");
}
