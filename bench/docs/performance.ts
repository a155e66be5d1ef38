// docs/performance.md: every table of the reference, and the measured sentences of "What the
// numbers say" (the explanations around them stay hand-written, without figures).
import { markdownTable, ratioText } from "../report.ts";
import type { ResultsDocument } from "../results.ts";
import { duration, NOT_MEASURED, type Reference, timesRange } from "./reference.ts";
import { CRASH, GRACEFUL, STEADY } from "./shared.ts";

/** Every table of the results, with its notes, as Markdown. */
export function tables(document: ResultsDocument): string {
  return document.tables
    .flatMap((table) => [markdownTable(table), "", ...table.notes.map((note) => `- ${note}`), ""])
    .join("\n");
}

/** "1.3× faster" for `ours` against `theirs` (medians at the two paths): the smaller, the faster. */
function faster(ref: Reference, ours: string, theirs: string): string {
  const a = ref.number(ours);
  const b = ref.number(theirs);
  return a === undefined || b === undefined ? NOT_MEASURED : ratioText(b / a);
}

/** The median over trials of (labelled − holds): what publishing adds to a handover. */
function labellingAdds(ref: Reference, series: string): string {
  const trials = ref.value(`${series}.trials`);
  if (!Array.isArray(trials)) return NOT_MEASURED;
  const gaps = trials
    .filter((t: { publishedMs: number | null }) => t.publishedMs !== null)
    .map((t: { publishedMs: number; holdsMs: number }) => t.publishedMs - t.holdsMs)
    .sort((x, y) => x - y);
  const median = gaps[Math.floor(gaps.length / 2)];
  return median === undefined ? NOT_MEASURED : duration(median);
}

export function saysCrash(ref: Reference): string {
  const [ours, theirs] = [CRASH("pglease"), CRASH("client-go")];
  return (
    `After a SIGKILL the new pglease leader holds the lease ${ref.ms(`${ours}.holds.p50Ms`)} later at the median ` +
    `(${ref.ms(`${ours}.holds.p99Ms`)} at worst), client-go's ${ref.ms(`${theirs}.holds.p50Ms`)} ` +
    `(${ref.ms(`${theirs}.holds.p99Ms`)}): pglease is ${faster(ref, `${ours}.holds.p50Ms`, `${theirs}.holds.p50Ms`)}. ` +
    `pglease's followers claim ${ref.ms(`${ours}.expiryToClaim.p50Ms`)} after the server-side expiry at the median ` +
    `(${ref.ms(`${ours}.expiryToClaim.p99Ms`)} at worst); labelling the new leader's pod adds ${labellingAdds(ref, ours)}.`
  );
}

export function saysAdvisory(ref: Reference): string {
  const lock = CRASH("advisory-lock");
  return (
    `${ref.ms(`${lock}.holds.p50Ms`)} at the median (${ref.ms(`${lock}.holds.p99Ms`)} at worst), ` +
    `${faster(ref, `${lock}.holds.p50Ms`, `${CRASH("pglease")}.holds.p50Ms`)} than pglease.`
  );
}

export function saysGraceful(ref: Reference): string {
  const ours = GRACEFUL("pglease");
  const release = GRACEFUL("client-go-release");
  const noRelease = GRACEFUL("client-go");
  const noNotify = GRACEFUL("pglease-no-notify");
  const holds = (series: string) => `${series}.holds.p50Ms`;
  return (
    `SIGTERM → new leader holds in ${ref.ms(holds(ours))} at the median (${ref.ms(`${ours}.holds.p99Ms`)} at worst); ` +
    `→ its pod labelled leader in ${ref.ms(`${ours}.published.p50Ms`)} (${ref.ms(`${ours}.published.p99Ms`)}). ` +
    `client-go with \`ReleaseOnCancel\` takes ${ref.ms(holds(release))} to hold ` +
    `(pglease ${faster(ref, holds(ours), holds(release))}; to be labelled against the Lease naming the holder, ` +
    `${faster(ref, `${ours}.published.p50Ms`, `${release}.published.p50Ms`)}); without it, client-go's default, ` +
    `${ref.ms(holds(noRelease))} (${faster(ref, holds(ours), holds(noRelease))}). The advisory lock, released by ` +
    `unlock, takes ${ref.ms(holds(GRACEFUL("advisory-lock")))}. pglease with \`--no-notify\` takes ${ref.ms(holds(noNotify))} ` +
    `to hold, ${faster(ref, holds(noNotify), holds(release))} than client-go's release.`
  );
}

function perPodHour(ref: Reference, system: string, what: "statements" | "apiRequests"): string {
  const path = `${STEADY(system)}.${what}`;
  const noun = what === "statements" ? "statements" : "API requests";
  return `${ref.count(`${path}.perPodPerHour`)} ${noun} (expected ${ref.count(`${path}.expectedPerPodPerHour`)})`;
}

function megabytes(value: unknown): string {
  return typeof value === "number" ? `${Math.round(value)} MB` : NOT_MEASURED;
}

export function saysSteady(ref: Reference): string {
  const cli = ref.value("footprint.cli");
  const variant = (index: number) => (Array.isArray(cli) ? cli[index] : undefined);
  const api = (system: string) => `${STEADY(system)}.apiRequests.perPodPerHour`;
  const statements = (system: string) => `${STEADY(system)}.statements.perPodPerHour`;
  return (
    `pglease: ${perPodHour(ref, "pglease", "statements")}, ${perPodHour(ref, "pglease", "apiRequests")}, ` +
    `${ref.count(`${STEADY("pglease")}.sessionsOpened.perPodPerHour`)} new connections. ` +
    `client-go: ${perPodHour(ref, "client-go", "apiRequests")}, ${ref.ratio(api("client-go"), api("pglease"))} ` +
    `pglease's. The advisory lock: ${perPodHour(ref, "advisory-lock", "statements")}; pglease sends ` +
    `${ref.ratio(statements("pglease"), statements("advisory-lock"))} as many. Resident memory per pod in the quiet elections: pglease ${megabytes(ref.number(`${STEADY("pglease")}.rssMbPerPod`))}, ` +
    `client-go ${megabytes(ref.number(`${STEADY("client-go")}.rssMbPerPod`))}, the advisory-lock poller ` +
    `${megabytes(ref.number(`${STEADY("advisory-lock")}.rssMbPerPod`))}; \`pglease run\` idle ` +
    `${megabytes(variant(0)?.rssMb?.meanMb)} outside a cluster and ${megabytes(variant(1)?.rssMb?.meanMb)} publishing. ` +
    `\`pglease run\` holds a free lease ${variant(0) ? duration(variant(0).startup.p50Ms) : NOT_MEASURED} after spawn ` +
    `outside a cluster, ${variant(1) ? duration(variant(1).startup.p50Ms) : NOT_MEASURED} publishing (median).`
  );
}

function factors(ref: Reference, prefix: string, diagnostic: boolean): number[] {
  const ratios = ref.value("lease-ops.ratios");
  if (!Array.isArray(ratios)) return [];
  return ratios
    .filter(
      (r: { subject: string; setup: string }) =>
        r.subject.startsWith(prefix) && r.setup.includes("diagnostic") === diagnostic,
    )
    .map((r: { factor: number }) => r.factor);
}

export function saysStatements(ref: Reference): string {
  const claim = "lease-ops.operations[setup=1 connection][operation=claim][statements=named].latency";
  return (
    `A claim takes ${ref.ms(`${claim}.p50Ms`)} at the median and one connection does about ` +
    `${ref.count(`${claim}.opsPerSec`)} claims per second; named prepared statements come out ` +
    `${timesRange(factors(ref, "named vs unnamed", false))} faster than unnamed ones. A read of a held lease is ` +
    `${timesRange(factors(ref, "read vs failed claim", false))} faster than the failed claim it replaces, ` +
    `${timesRange(factors(ref, "read vs failed claim", true))} with the commit flush taken out. The session advisory ` +
    `lock is ${timesRange(factors(ref, "advisory try-lock vs claim", false))} faster than a claim.`
  );
}

export function saysScale(ref: Reference): string {
  const big = "scale.sizes[leases=10000]";
  const cpuShare = ref.number(`${big}.batched.cpuMsPerSecondAtDefaultRenew`);
  const electors = ref.value("scale.electors");
  const perCount = Array.isArray(electors)
    ? electors
        .map(
          (e: { leases: number; renewStatementsPerInterval: number; allLeading: boolean }) =>
            `${e.leases.toLocaleString("en-US")}: ${e.renewStatementsPerInterval.toFixed(1)}${e.allLeading ? "" : " (not all leading at the end)"}`,
        )
        .join(", ")
    : NOT_MEASURED;
  return (
    `\`renewMany\` renews 10,000 leases in one statement in ${ref.ms(`${big}.batched.tick.meanMs`)} (mean), ` +
    `${ref.ratio(`${big}.oneEach.tick.meanMs`, `${big}.batched.tick.meanMs`)} faster than one statement each through ` +
    `the pool of 4, for ${ref.ms(`${big}.batched.cpuMsPerTick`)} of this process's CPU per tick, ` +
    `${cpuShare === undefined ? NOT_MEASURED : `${(cpuShare / 10).toFixed(1)} %`} of a core at the default renew ` +
    `interval. Through \`openLeases\`, renew statements per renew interval by number of electors: ${perCount}.`
  );
}
