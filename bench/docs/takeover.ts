// The takeover group in the docs: the performance summary's crash-without-expiry table (and the health handover)
// and the measured sentence of docs/performance.md, beside the peers group's crash rows.
import { NOT_MEASURED, type Reference } from "./reference.ts";
import { CRASH } from "./shared.ts";

const RESTART = (system: string) => `takeover.restart[system=${system}]`;
const SESSION = "takeover.crash[system=pglease-session-takeover]";
const HEALTH = "takeover.health[system=pglease-health-gate]";

/** "2.1 s / 3.0 s (start 2.0 s / 2.9 s)": the new term, and the restarted process's own start. */
function restartCell(ref: Reference, system: string): string {
  const series = RESTART(system);
  const holds = ref.spread(`${series}.holds`);
  if (holds === NOT_MEASURED) return holds;
  return `${holds} (start ${ref.spread(`${series}.start`)})`;
}

function restartedLed(ref: Reference, system: string): string {
  const led = ref.number(`${RESTART(system)}.restartedLed`);
  const trials = ref.value(`${RESTART(system)}.trials`);
  return led === undefined || !Array.isArray(trials) ? NOT_MEASURED : `${led} of ${trials.length}`;
}

export function takeoverSummary(ref: Reference): string {
  return [
    "| SIGKILL → new leader holds (p50 / p99) | pglease | client-go Lease | advisory lock |",
    "|---|---:|---:|---:|",
    `| restarted in place (process start in brackets) | **${restartCell(ref, "pglease")}**; over its start **${ref.spread(`${RESTART("pglease")}.overStart`)}**; the restarted process led in ${restartedLed(ref, "pglease")} | ` +
      `${restartCell(ref, "client-go")} with a new identity per process; ${restartCell(ref, "client-go-same-identity")} with the identity kept (no proof of death) | ` +
      `${restartCell(ref, "advisory-lock")} |`,
    `| not restarted | ${ref.spread(`${CRASH("pglease")}.holds`)} by default; **${ref.spread(`${SESSION}.holds`)}** with \`--session-takeover\` | ` +
      `${ref.spread(`${CRASH("client-go")}.holds`)} | ${ref.spread(`${CRASH("advisory-lock")}.holds`)} |`,
    `| the application in the leader's pod turns unready (\`--health-gate pod\`, grace ${ref.ms(`${HEALTH}.graceMs`)}): a healthy pod labelled | ` +
      `**${ref.spread(`${HEALTH}.labelled`)}**, ${ref.spread(`${HEALTH}.overGrace`)} over the grace | never: no health input | never |`,
  ].join("\n");
}

export function saysTakeover(ref: Reference): string {
  const ours = RESTART("pglease");
  return (
    `Restarted in place, pglease's new term comes ${ref.ms(`${ours}.holds.p50Ms`)} after the SIGKILL at the median ` +
    `(${ref.ms(`${ours}.holds.p99Ms`)} at worst), ${ref.ms(`${ours}.overStart.p50Ms`)} after the restarted process's own ` +
    `start (${ref.ms(`${ours}.overStart.p99Ms`)} at worst), which took ${ref.spread(`${ours}.start`)}; the restarted ` +
    `process led in ${restartedLed(ref, "pglease")} trials. client-go with a new identity per process: ` +
    `${ref.spread(`${RESTART("client-go")}.holds`)}; with the identity kept, ` +
    `${ref.spread(`${RESTART("client-go-same-identity")}.holds`)}, ${ref.spread(`${RESTART("client-go-same-identity")}.overStart`)} ` +
    `over its start. The advisory lock: ${ref.spread(`${RESTART("advisory-lock")}.holds`)}, its restarted process ` +
    `leading in ${restartedLed(ref, "advisory-lock")}. Not restarted, with \`--session-takeover\`: ` +
    `${ref.spread(`${SESSION}.holds`)}, ${ref.spread(`${SESSION}.overRetry`)} over the ${ref.ms("takeover.timing.retryMs")} follower retry interval. ` +
    `When the application in the leader's pod turns unready under \`--health-gate pod\`, a pod whose application is ready is labelled leader ` +
    `${ref.spread(`${HEALTH}.labelled`)} later, ${ref.spread(`${HEALTH}.overGrace`)} over the ${ref.ms(`${HEALTH}.graceMs`)} grace period; ` +
    "client-go's leader keeps its Lease until its process dies."
  );
}
