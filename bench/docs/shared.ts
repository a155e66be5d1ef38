// Regions of docs/performance.md: the runs that measured the reference,
// what the peers ran against, and the targets' verdicts (evaluated by the bench, bench/targets.ts).
import type { RunInfo } from "../results.ts";
import { figureText, thresholdText } from "../targets.ts";
import type { Reference } from "./reference.ts";

export const CRASH = (system: string) => `peers.series[event=crash][system=${system}]`;
export const GRACEFUL = (system: string) => `peers.series[event=graceful][system=${system}]`;
export const STEADY = (system: string) => `peers.steady[system=${system}]`;

function runSentence(run: RunInfo): string {
  const { machine, database } = run;
  const seconds = Math.round((Date.parse(run.finishedAt) - Date.parse(run.startedAt)) / 1000);
  return (
    `${run.groups.join(", ")}: measured ${run.startedAt.slice(0, 10)} with \`${run.command}\` (${seconds} s) ` +
    `on ${machine.cpus} × ${machine.cpuModel}, ${machine.memoryGb} GB, Node ${machine.node}, ` +
    `PostgreSQL ${database.version} (${database.source}, fsync ${database.settings.fsync ?? "?"}, ` +
    `synchronous_commit ${database.settings.synchronous_commit ?? "?"}); load average ` +
    `${machine.loadAverage.atStart.toFixed(1)} at the start, ${machine.loadAverage.atEnd.toFixed(1)} at the end.`
  );
}

export function runs(ref: Reference): string {
  return ref.document.runs.map((run) => `- ${runSentence(run)}`).join("\n");
}

/** What client-go ran as, and against which API server; or why it was not measured. */
export function peersKube(ref: Reference): string {
  const apiServer = ref.value("peers.kube.apiServer");
  const clientGo = ref.value("peers.kube.clientGo");
  if (typeof clientGo !== "string") {
    return `client-go was not measured in the reference run (${String(ref.value("peers.kube.reason") ?? "no peers run")})`;
  }
  return `the real \`${clientGo}\` against the real \`${String(apiServer)}\``;
}

/** "24 trials per figure, client-go defaults (lease 15 s, …)". */
export function peersTrials(ref: Reference): string {
  const trials = ref.value(`${CRASH("pglease")}.trials`);
  const timing = ref.value("peers.timing.name");
  return `${Array.isArray(trials) ? trials.length : 0} trials per figure, ${String(timing)}`;
}

export function targets(ref: Reference): string {
  return ref.document.targets
    .map((t) => {
      const measured = t.measured === null ? "" : ` (${figureText(t.measured, t.unit)})`;
      const note = t.note ? `: ${t.note}` : "";
      return `- ${t.target} ${thresholdText(t)}: **${t.verdict}**${measured}${note}.`;
    })
    .join("\n");
}
