// The real-cluster group in docs/performance.md: the leader Service's leaderless and two-endpoint
// time per disruption, pglease (the chart) beside the client-go labeller, from the reference.
import { duration, NOT_MEASURED, type Reference, times } from "./reference.ts";

const SERIES = (system: string, scenario: string) =>
  `real-cluster.series[system=${system}][scenario=${scenario}]`;

function scenarioSentence(ref: Reference, scenario: string, what: string): string {
  const pglease = SERIES("pglease", scenario);
  const clientGo = SERIES("client-go-labeller", scenario);
  const p50 = ref.number(`${pglease}.leaderless.p50Ms`);
  const p99 = ref.number(`${pglease}.leaderless.p99Ms`);
  const goP50 = ref.number(`${clientGo}.leaderless.p50Ms`);
  const goP99 = ref.number(`${clientGo}.leaderless.p99Ms`);
  if (p50 === undefined || p99 === undefined) return `${what}: ${NOT_MEASURED}.`;
  const trials = ref.count(`${pglease}.trials.length`);
  const theirs =
    goP50 === undefined || goP99 === undefined
      ? "the client-go labeller not measured"
      : `the client-go labeller's ${duration(goP50)} (${duration(goP99)}): pglease's ${
          goP50 >= p50 ? `${times(goP50 / p50)} shorter` : `${times(p50 / goP50)} longer`
        } at the median, ${goP99 >= p99 ? `${times(goP99 / p99)} shorter` : `${times(p99 / goP99)} longer`} at p99`;
  return (
    `${what} (${trials} trials each): the leader Service had no ready endpoint for ${duration(p50)} at the ` +
    `median with pglease (${duration(p99)} at p99), ${theirs}; two ready endpoints for at most ` +
    `${ref.ms(`${pglease}.twoReadyMaxMs`)} with pglease and ${ref.ms(`${clientGo}.twoReadyMaxMs`)} with client-go.`
  );
}

export function saysRealCluster(ref: Reference): string {
  const skipped = ref.value("real-cluster.skipped");
  if (typeof skipped === "string") return `Not measured in the reference run (${skipped}).`;
  if (ref.value("real-cluster") === undefined) return `${NOT_MEASURED} in the reference run.`;
  const load = ["atStart", "atEnd"].map(
    (k) => ref.number(`real-cluster.loadAverage.${k}`)?.toFixed(1) ?? "?",
  );
  return [
    scenarioSentence(ref, "delete", "`kubectl delete` of the leader pod"),
    scenarioSentence(ref, "rollout", "`kubectl rollout restart`"),
    `The host's load average was ${load[0]} as the group began and ${load[1]} as it ended.`,
  ].join(" ");
}
